from django.contrib import admin

from webfarm.progress.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "owner", "state", "created_at", "finished_at")
    list_filter = ("state", "kind")
    search_fields = ("id", "owner__username")
    readonly_fields = ("id", "created_at", "started_at", "finished_at")
