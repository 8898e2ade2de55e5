from django.apps import AppConfig, apps


class LimitsConfig(AppConfig):
    name = "webfarm.limits"
    label = "webfarm_limits"
    verbose_name = "Farm-wide concurrency limits"

    def ready(self) -> None:
        from webfarm.limits import checks  # noqa: F401 (registers the checks)

        if apps.is_installed("django.contrib.admin"):
            from django.contrib import admin

            from webfarm.limits.passwords import throttle_admin

            throttle_admin(admin.site)
