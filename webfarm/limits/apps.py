from django.apps import AppConfig, apps

from webfarm.core import needs


class LimitsConfig(AppConfig):
    name = "webfarm.limits"
    label = "webfarm_limits"
    verbose_name = "Farm-wide concurrency limits"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        from webfarm.limits import checks  # noqa: F401 (registers the checks)

        if apps.is_installed("django.contrib.admin"):
            from django.contrib import admin

            from webfarm.limits.passwords import throttle_admin

            throttle_admin(admin.site)
