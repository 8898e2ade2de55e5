"""Progress polls answered before Django's middleware chain.

    # wsgi.py
    application = PollGate(get_wsgi_application())

A bar polls every second or two, and most of what a poll costs through
Django is the machinery around the view: the whole middleware chain, the
URL resolver, the handler's wrappers. The gate answers the two poll URLs
itself (webfarm.progress.views.progress_detail and progress_by_token, wherever the
URLconf mounts them: it asks the resolver, once per path) and hands every
other request to Django untouched.

Three ways, each falling back to the one after it:

* the lanes (`lanes`): a poll whose answer memcached alone gives, with
  Django's rules for it checked here: the token URL's published document;
  the session URL for a signed-in user whose session, user and job record
  are cached. The headers the project's SecurityMiddleware and
  XFrameOptionsMiddleware add are worked out once, by running them; the
  other middleware hears of the poll through its
  `poll_answered(path, status, username)`. A middleware with no such hook
  closes the lanes.
* the chain (`chain`): the views as they are, inside the project's own
  middleware (SecurityMiddleware's headers, the session and its user,
  X-Frame-Options, the request log), in the project's order, with
  request_started and request_finished sent. Only the middleware that does
  nothing for a GET of a poll is left out (SKIPPED_FOR_POLLS, and any
  middleware whose class says `poll_skippable = True`). A project
  whose MIDDLEWARE holds something the gate cannot run that way (a
  process_view or process_exception hook, async only) gets no gate: every
  request goes to Django, and the log says why, once.
* Django: a view that raises, or an answer the gate cannot give (a HEAD, a
  streamed body), is handed to Django, which answers it as it always has.
"""

from webfarm.progress.pollgate.gate import PollGate

__all__ = ["PollGate"]
