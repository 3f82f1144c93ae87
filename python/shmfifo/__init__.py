"""shmfifo: Amazon SQS FIFO queue semantics between the processes of one host, over shared
memory — message groups in strict order, in-flight exclusion, visibility timeouts,
deduplication, dead-letter queues — with no broker.

Two ways in:

* ``shmfifo.client("sqs")``: the calls and answers of ``boto3.client("sqs")`` on local queues,
  so code written for SQS FIFO runs unchanged;
* ``shmfifo.Queue``: a Pythonic queue (``Queue.create/open``, ``send``, ``receive`` returning
  ``Message`` objects, ``with`` blocks).

What a queue refuses is a ``shmfifo.Error`` (``code`` is SQS's error code), or from the
client a ``ClientError`` as boto3 raises it; ``shmfifo.Queue`` raises ``TypeError`` or
``ValueError`` for an argument of the wrong type or sign, and for a closed handle.
"""

from ._client import Client, ClientError, client, md5_of_message_attributes
from ._errors import Error
from ._queue import AttributeValue, Message, Queue, Redriven, SendResult
from ._shmfifo import LOCAL_ARN_PREFIX

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("shmfifo")
except (ImportError, PackageNotFoundError):  # pragma: no cover - a source tree, not installed
    __version__ = "0.0.0"

__all__ = [
    "AttributeValue",
    "Client",
    "ClientError",
    "Error",
    "LOCAL_ARN_PREFIX",
    "Message",
    "Queue",
    "Redriven",
    "SendResult",
    "client",
    "md5_of_message_attributes",
]
