"""Password resets: a few a window per e-mail address and per client address.

Each reset asked for sends an e-mail: unthrottled, anyone could make the
farm mail someone again and again, or spend its mail quota. An address that
asked RESETS_PER_EMAIL times within RESET_WINDOW seconds, or a client that
asked RESETS_PER_ADDRESS times, is refused (429, with Retry-After) until the
window ends, without a word sent. Every request counts, whether an account
has the address or not, so a refusal tells nobody who has an account.
"""

import unicodedata

from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import PasswordResetView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from webfarm.core.http import client_address
from webfarm.core.refusals import note_refusal
from webfarm.limits.conf import get_config
from webfarm.limits.windows import count, digest


def reset_keys(request: HttpRequest, email: str) -> list[str]:
    """The keys counting resets asked for this e-mail address and by this client."""
    folded = unicodedata.normalize("NFKC", email.strip()).casefold()
    keys = [f"reset:email:{digest(folded)}"]
    address = client_address(request)
    if address:
        keys.append(f"reset:addr:{digest(address)}")
    return keys


class ThrottledPasswordResetView(PasswordResetView):
    """Django's PasswordResetView, sending no e-mail past the limits."""

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        config = get_config()
        wait = int(config["RESET_WINDOW"])
        keys = reset_keys(self.request, form.cleaned_data["email"])
        limits = [config["RESETS_PER_EMAIL"], config["RESETS_PER_ADDRESS"]]
        if all(counted <= limit for counted, limit in zip(count(keys, wait), limits, strict=False)):
            return super().form_valid(form)
        message = f"Too many password resets asked for. Try again in {max(1, wait // 60)} minutes."
        note_refusal(self.request, "password_resets", message, wait, status=429)
        # On the address's field, where every reset template (the admin's
        # too) shows its errors: the refusal says why, on any project's page.
        form.add_error("email", ValidationError(message, code="throttled"))
        response = self.render_to_response(self.get_context_data(form=form), status=429)
        response["Retry-After"] = str(wait)
        return response
