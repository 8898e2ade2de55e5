"""What the progress app tells other apps.

`job_ended` is sent once per job, by the process whose write ended it: the
worker that ran it, the web process that cancelled it while it was queued,
or the worker whose reaper found it lost. Arguments: `job_id`, `kind` and
`state` (a final State's value); `job` and `record`, the row and the live
record as the end left them, when the sender has them (else None: read the
row). It is sent with send_robust: a receiver that fails is logged, and
ends nothing else.
"""

from django.dispatch import Signal

job_ended = Signal()
