"""The exception every shmfifo call raises."""

from __future__ import annotations


class Error(Exception):
    """A shmfifo error.

    ``code`` is the SQS error code (``InvalidParameterValue``, ``ReceiptHandleIsInvalid``,
    ``AWS.SimpleQueueService.NonExistentQueue`` …) or, for what only shmfifo has, a
    ``shmfifo.`` code (``shmfifo.SizeClassFull`` …); ``message`` the text; ``kind`` the Rust
    library's ``ErrorCode`` name.
    """

    def __init__(self, code: str, message: str, kind: str = "") -> None:
        super().__init__(code, message, kind)

    @property
    def code(self) -> str:
        return self.args[0]

    @property
    def message(self) -> str:
        return self.args[1]

    @property
    def kind(self) -> str:
        return self.args[2]

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
