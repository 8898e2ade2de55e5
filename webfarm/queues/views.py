"""The HTTP front of the queues: producers POST, consumers GET, errors are status codes.

The front reaches only queues of its own (webfarm.queues.front): `/queues/orders/`
is the queue `http.orders`, never one of the farm's internal queues.
"""

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webfarm.core.counters import count
from webfarm.core.http import json_error, require_token
from webfarm.queues import front
from webfarm.queues.exceptions import (
    ClaimLost,
    InvalidQueueName,
    InvalidReceipt,
    MessageTooLarge,
    QueueFull,
    QueueUnavailable,
    ReceiptNotJSON,
)
from webfarm.queues.queue import DeadLetter, Queue

RETRY_AFTER = 2
_CACHED_QUEUES = 256
DEAD_LETTERS_SHOWN = 50
_local = threading.local()


def _queue(url_name: str, *, writing: bool = False) -> Queue:
    """This thread's Queue object for the front's queue `url_name` (it keeps
    the generation and index reserve between requests). No prefetch: a web
    process must not sit on messages other consumers could take. Reading a
    queue nobody has put into creates nothing (NoSuchQueue)."""
    name = front.queue_name(url_name)
    if writing:
        front.for_writing(name)
    else:
        front.for_reading(name)
    cache: OrderedDict[str, Queue] = _local.__dict__.setdefault("queues", OrderedDict())
    queue = cache.get(name)
    if queue is None:
        queue = Queue(name)
        queue.prefetch = 1
        cache[name] = queue
        if len(cache) > _CACHED_QUEUES:
            cache.popitem(last=False)
    cache.move_to_end(name)
    return queue


def _queue_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except InvalidQueueName as exc:
            return json_error(400, str(exc))
        except (front.InternalQueue, front.TooManyQueues) as exc:
            return json_error(403, str(exc).capitalize() + ".")
        except front.QueueAtCapacity as exc:
            count("refused", reason="queue_at_capacity")
            return json_error(
                507,
                f"{str(exc)[:1].upper()}{str(exc)[1:]}: try again once consumers have taken some.",
                retry_after=RETRY_AFTER,
            )
        except front.NoSuchQueue as exc:
            return json_error(404, str(exc).capitalize() + ".")
        except ReceiptNotJSON as exc:
            return json_error(415, str(exc))
        except InvalidReceipt as exc:
            return json_error(400, str(exc))
        except ClaimLost as exc:
            return json_error(409, str(exc).capitalize() + ": it will be delivered again.")
        except MessageTooLarge as exc:
            return json_error(413, str(exc))
        except QueueFull as exc:
            count("refused", reason="queue_full")
            return json_error(507, str(exc), retry_after=RETRY_AFTER)
        except QueueUnavailable:
            return json_error(503, "The queue store is unreachable; try again.", retry_after=RETRY_AFTER)

    return wrapped


@require_token("QUEUE_API_TOKEN")
@require_http_methods(["GET", "POST"])
@_queue_errors
def messages(request: HttpRequest, name: str) -> HttpResponse:
    if request.method == "POST":
        queue = _queue(name, writing=True)
        declared = request.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > queue.layout.max_bytes:
            raise MessageTooLarge(f"message of {declared} bytes is over the {queue.layout.max_bytes} limit")
        body = request.body
        if not body:
            return json_error(400, "The message is empty.")
        front.admit(queue, len(body))
        index = queue.put(body)
        return JsonResponse({"queue": name, "index": index}, status=201)

    try:
        queue = _queue(name)
    except front.NoSuchQueue:
        return HttpResponse(status=204)  # nothing was ever put there: empty
    message = queue.claim()
    if message is None:
        return HttpResponse(status=204)
    response = HttpResponse(message.body, content_type="application/octet-stream")
    response["Queue-Index"] = str(message.index)
    response["Queue-Receipt"] = message.receipt
    response["Queue-Redelivered"] = "true" if message.redelivered else "false"
    response["Queue-Enqueued-At"] = f"{message.enqueued_at:.3f}"
    response["Cache-Control"] = "no-store"
    return response


def _receipt(request: HttpRequest) -> str:
    """From a JSON body {"receipt": ...} or the Queue-Receipt header."""
    if request.body:
        if request.content_type != "application/json":
            raise ReceiptNotJSON('Send the receipt as JSON: {"receipt": "..."}.')
        try:
            receipt = json.loads(request.body).get("receipt")
        except (ValueError, AttributeError, RecursionError):
            raise InvalidReceipt('The body must be a JSON object: {"receipt": "..."}.') from None
    else:
        receipt = request.headers.get("Queue-Receipt")
    if not receipt:
        raise InvalidReceipt("No receipt given.")
    if not isinstance(receipt, str):
        raise InvalidReceipt("The receipt must be a string.")
    return receipt


@require_token("QUEUE_API_TOKEN")
@require_POST
@_queue_errors
def ack(request: HttpRequest, name: str) -> HttpResponse:
    receipt = _receipt(request)
    _queue(name).ack(receipt)
    return HttpResponse(status=204)


@require_token("QUEUE_API_TOKEN")
@require_POST
@_queue_errors
def reject(request: HttpRequest, name: str) -> HttpResponse:
    receipt = _receipt(request)
    index = front.reject(_queue(name), receipt)
    # None: rejected once too often, it went to the dead letters (or was finished already).
    return JsonResponse({"queue": name, "index": index, "dead_letter": index is None})


@require_token("QUEUE_API_TOKEN")
@require_GET
@_queue_errors
def stats(request: HttpRequest, name: str) -> HttpResponse:
    response = JsonResponse({"queue": name, **_queue(name).stats()})
    response["Cache-Control"] = "no-store"
    return response


@require_token("QUEUE_API_TOKEN")
@require_GET
@_queue_errors
def dead_letters(request: HttpRequest, name: str) -> HttpResponse:
    """The queue's dead letters, oldest first (looking takes nothing away)."""
    queue = _queue(name)
    letters = [DeadLetter.from_json(m.body) for m in queue.dead_letters().peek(DEAD_LETTERS_SHOWN)]
    response = JsonResponse(
        {
            "queue": name,
            "dead_letters": queue.stats()["dead_letters"],
            "shown": [
                {
                    "reason": letter.reason,
                    "deliveries": letter.deliveries,
                    "enqueued_at": letter.enqueued_at,
                    "dead_at": letter.dead_at,
                    "body": letter.body.decode(errors="replace"),
                }
                for letter in letters
            ],
        }
    )
    response["Cache-Control"] = "no-store"
    return response
