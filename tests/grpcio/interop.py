"""Python's grpcio against a tonic server behind shed (tests/grpcio/server.rs).

Run by .ci/grpcio, which installs grpcio and builds the server:

    python interop.py <path to the grpcio-server binary>

Checks what a gRPC client with a gRFC A6 retry policy sees of shed:
overload is RESOURCE_EXHAUSTED (or UNAVAILABLE when configured) with
grpc-retry-pushback-ms; a deadline too close to be met is DEADLINE_EXCEEDED;
grpcio waits at least the pushback before it retries, and marks the retry
with grpc-previous-rpc-attempts, which shed judges as a retry.

Every answer follows from the calls made (held slots, full queues): no
timing decides a result. Loopback only; the servers are started and stopped
here.
"""

import json
import subprocess
import sys
import time
import urllib.request

import grpc

GRPC_TIMEOUT_S = 20
PUSHBACK_S = 1.0  # the door server's pushback: its cap, and at least 1 s

RETRY_POLICY = {
    "methodConfig": [
        {
            "name": [{"service": "interop.v1.Probe", "method": "Work"}],
            "retryPolicy": {
                "maxAttempts": 2,
                "initialBackoff": "0.01s",
                "maxBackoff": "0.01s",
                "backoffMultiplier": 1,
                "retryableStatusCodes": ["RESOURCE_EXHAUSTED"],
            },
        }
    ],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
}


def identity(message):
    return message


class Server:
    """A grpcio-server process: started on entry, stopped on exit."""

    def __init__(self, binary, *args):
        self.command = [binary, *args]

    def __enter__(self):
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        line = self.process.stdout.readline().split()
        if not line:
            raise SystemExit(f"{self.command} exited before listening")
        fields = dict(field.split("=", 1) for field in line)
        self.grpc_addr, self.stats_url = fields["grpc"], fields["stats"]
        return self

    def __exit__(self, *_):
        self.process.stdin.close()  # the server's signal to stop
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def stats(self):
        with urllib.request.urlopen(self.stats_url, timeout=5) as response:
            return json.load(response)

    def settle(self, what, predicate):
        """Waits (bounded) until the stats satisfy `predicate`."""
        for _ in range(500):
            if predicate(self.stats()):
                return
            time.sleep(0.01)
        raise AssertionError(f"never happened: {what}; stats: {self.stats()}")

    def channel(self, retries=False):
        options = [("grpc.enable_retries", 1 if retries else 0)]
        if retries:
            options.append(("grpc.service_config", json.dumps(RETRY_POLICY)))
        return grpc.insecure_channel(self.grpc_addr, options=options)


def method(channel, name):
    return channel.unary_unary(
        f"/interop.v1.Probe/{name}",
        request_serializer=identity,
        response_deserializer=identity,
    )


def hold(server, channel, metadata=None):
    """Sends a call that holds its slot (or its waiting place) until cancelled."""
    return method(channel, "Hold").future(b"", timeout=GRPC_TIMEOUT_S, metadata=metadata)


def fill(server, channel):
    """Makes the one-slot server full: one call served, one original waiting."""
    serving = hold(server, channel)
    server.settle("a held call is served", lambda stats: stats["in_flight"] == 1)
    waiting = hold(server, channel)
    server.settle("a held call waits", lambda stats: stats["queued"]["interactive"] == 1)
    return [serving, waiting]


def refusal(call):
    try:
        call()
    except grpc.RpcError as error:
        return error
    raise AssertionError("the call was served; a refusal was expected")


def pushback_s(error):
    metadata = dict(error.trailing_metadata() or ())
    value = metadata.get("grpc-retry-pushback-ms")
    assert value is not None, f"no grpc-retry-pushback-ms: {metadata}"
    return int(value) / 1000


def check(name, condition, detail):
    if not condition:
        raise AssertionError(f"{name}: {detail}")
    print(f"ok   {name}: {detail}")


def deadline_refusal(binary):
    with Server(binary, "door") as server, server.channel() as channel:
        # The door refuses calls that leave less than 2 s: this one leaves 1 s,
        # and is answered long before grpcio's own timer would fire.
        error = refusal(lambda: method(channel, "Work")(b"", timeout=1.0))
        check(
            "a deadline too close to be met is DEADLINE_EXCEEDED",
            error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            and error.details() == "the request's deadline is too close to be met",
            f"{error.code().name} {error.details()!r}",
        )


def overload_refusal(binary, flags, expected):
    with Server(binary, "door", *flags) as server, server.channel() as channel:
        held = fill(server, channel)
        error = refusal(lambda: method(channel, "Work")(b"", timeout=GRPC_TIMEOUT_S))
        check(
            f"overload is {expected.name} with a pushback" + (f" ({' '.join(flags)})" if flags else ""),
            error.code() == expected and pushback_s(error) >= PUSHBACK_S,
            f"{error.code().name}, grpc-retry-pushback-ms {pushback_s(error) * 1000:.0f}",
        )
        for call in held:
            call.cancel()


def retry_waits_for_the_pushback(binary):
    with Server(binary, "door") as server, server.channel() as channel:
        held = fill(server, channel)
        # The retry rank's one waiting place taken too: both attempts are
        # refused, the second as soon as it arrives.
        held.append(hold(server, channel, metadata=[("grpc-previous-rpc-attempts", "1")]))
        server.settle("a held retry waits", lambda stats: stats["queued"]["interactive retry"] == 1)
        with server.channel(retries=True) as retrying:
            started = time.monotonic()
            error = refusal(lambda: method(retrying, "Work")(b"", timeout=GRPC_TIMEOUT_S))
            elapsed = time.monotonic() - started
        refused = server.stats()["classes"]["interactive"]["queue_full"]
        check(
            "grpcio retries after at least the pushback",
            error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and refused == 2 and elapsed >= PUSHBACK_S,
            f"2 attempts refused in {elapsed:.3f} s, pushback {PUSHBACK_S:.3f} s",
        )
        for call in held:
            call.cancel()


def retry_is_judged_as_a_retry(binary):
    with Server(binary, "door") as server, server.channel() as channel:
        held = fill(server, channel)
        with server.channel(retries=True) as retrying:
            # The first attempt finds the originals' queue full; its retry
            # finds room in the retries' queue, if shed reads it as a retry.
            call = method(retrying, "Work").future(b"", timeout=GRPC_TIMEOUT_S)
            server.settle(
                "grpcio's retry waits in the interactive retry queue",
                lambda stats: stats["queued"]["interactive retry"] == 1,
            )
            for held_call in held:
                held_call.cancel()
            served = call.result() == b""
        interactive = server.stats()["classes"]["interactive"]
        check(
            "grpcio marks its retry with grpc-previous-rpc-attempts, and shed judges it a retry",
            served and interactive["queue_full"] == 1,
            "its first attempt refused, its retry waited in the interactive retry queue, then was served",
        )


def main():
    binary = sys.argv[1]
    deadline_refusal(binary)
    overload_refusal(binary, [], grpc.StatusCode.RESOURCE_EXHAUSTED)
    overload_refusal(binary, ["--unavailable"], grpc.StatusCode.UNAVAILABLE)
    retry_waits_for_the_pushback(binary)
    retry_is_judged_as_a_retry(binary)
    print(f"grpcio {grpc.__version__}: every check passed")


if __name__ == "__main__":
    main()
