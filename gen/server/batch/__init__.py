"""OpenAI Batch API files run through `gen serve`'s app in process: the input file read
and checked (inputs), the output and errors files (outputs), the run (runner)."""

from gen.server.batch.inputs import BatchRequest, LineError, read_requests
from gen.server.batch.outputs import Entry, ResultFile, error_entry, response_entry, succeeded
from gen.server.batch.runner import OpenAIBatch, body_problem, local_client, remote_client

__all__ = [
    "BatchRequest",
    "Entry",
    "LineError",
    "OpenAIBatch",
    "ResultFile",
    "body_problem",
    "error_entry",
    "local_client",
    "read_requests",
    "remote_client",
    "response_entry",
    "succeeded",
]
