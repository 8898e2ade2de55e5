from django.contrib import admin

from demofarm.polls.models import Choice, Poll, Vote


class ChoiceInline(admin.TabularInline):
    model = Choice
    extra = 3


@admin.register(Poll)
class PollAdmin(admin.ModelAdmin):
    list_display = ("question", "is_open", "ends_at", "created_at")
    list_filter = ("is_open",)
    search_fields = ("question",)
    inlines = [ChoiceInline]


@admin.register(Vote)
class VoteAdmin(admin.ModelAdmin):
    list_display = ("id", "poll", "choice", "voter", "via", "cast_at")
    list_filter = ("via",)
    readonly_fields = [f.name for f in Vote._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False  # votes come from voters
