"""Counters fed by Django's own signals."""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save
from django.dispatch import receiver

from webfarm.core.counters import count


@receiver(user_logged_in)
def _login(**kwargs: Any) -> None:
    count("logins")


@receiver(post_save, sender=get_user_model())
def _account_created(*, created: bool, **kwargs: Any) -> None:
    if created:
        count("accounts_created")
