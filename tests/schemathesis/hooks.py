"""What schemathesis needs to reach settle's HTTP API that it does not have built in.

`POST /v1/ingest` takes JSON lines (`application/x-ndjson`): text, one event a line. schemathesis
has no serializer for that media type; this one sends a text as it is. A value that is not text
cannot be a body of JSON lines at all, so none is sent for it (and settle answers 400: the body is
required).
"""

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def json_lines(ctx, value):
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    return None
