"""Attempts per call and success under overload, for grpcio clients with a
gRFC A6 retry policy, against shed with and without its pushback.

Run by `.ci/grpcio measure` (not a pass/fail test: it prints a table).

The server (tests/grpcio/server.rs, `load`) serves 20 ms calls with 4
slots: about 200 calls a second. Eight grpcio channels (eight clients, each
with its own retry throttle) offer twice that, open loop, for a few
seconds. "No pushback" is the same server answering overload without
grpc-retry-pushback-ms (an on_rejection hook), so the clients fall back to
their exponential backoff.

Attempts per call are counted by shed (every arrival it admitted or
refused, over the calls sent); success and latency by the clients.
"""

import json
import subprocess
import sys
import threading
import time
import urllib.request

import grpc

RATE = 400  # calls per second offered: about twice capacity
SECONDS = 5
CHANNELS = 8
DEADLINE_S = 2.0


def policy(throttled):
    config = {
        "methodConfig": [
            {
                "name": [{"service": "interop.v1.Probe", "method": "Work"}],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["RESOURCE_EXHAUSTED"],
                },
            }
        ]
    }
    if throttled:
        config["retryThrottling"] = {"maxTokens": 10, "tokenRatio": 0.1}
    return config


def run(binary, flags, throttled):
    process = subprocess.Popen(
        [binary, "load", *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        fields = dict(field.split("=", 1) for field in process.stdout.readline().split())
        options = [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", json.dumps(policy(throttled))),
        ]
        channels = [grpc.insecure_channel(fields["grpc"], options=options) for _ in range(CHANNELS)]
        work = [
            channel.unary_unary(
                "/interop.v1.Probe/Work",
                request_serializer=lambda message: message,
                response_deserializer=lambda message: message,
            )
            for channel in channels
        ]
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=5)

        lock = threading.Lock()
        outcomes = []  # (ok, latency)
        pending = []

        def record(started):
            def done(future):
                ok = future.exception() is None
                with lock:
                    outcomes.append((ok, time.monotonic() - started))

            return done

        start = time.monotonic()
        total = RATE * SECONDS
        for n in range(total):
            due = start + n / RATE
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            started = time.monotonic()
            future = work[n % CHANNELS].future(b"", timeout=DEADLINE_S)
            future.add_done_callback(record(started))
            pending.append(future)
        for future in pending:
            try:
                future.result()
            except grpc.RpcError:
                pass
        with urllib.request.urlopen(fields["stats"], timeout=5) as response:
            stats = json.load(response)
        for channel in channels:
            channel.close()
    finally:
        process.stdin.close()
        process.wait(timeout=10)

    arrivals = sum(c["admitted"] + c["shed"] + c["shed_by_deadline"] + c["queue_full"]
                   + c["dropped_from_queue"] + c["expired"] for c in stats["classes"].values())
    ok = [latency for success, latency in outcomes if success]
    ok.sort()
    p50 = ok[len(ok) // 2] * 1000 if ok else float("nan")
    return {
        "calls": total,
        "attempts_per_call": arrivals / total,
        "success": len(ok) / total,
        "p50_ms": p50,
    }


def main():
    binary = sys.argv[1]
    print(f"grpcio {grpc.__version__}; {RATE} calls/s for {SECONDS} s over {CHANNELS} channels, "
          f"capacity about 200/s; maxAttempts 5, backoff 50 ms x2 up to 1 s; deadline {DEADLINE_S} s")
    print(f"{'server':<12} {'throttling':<11} {'calls':>6} {'attempts/call':>14} {'success':>8} {'p50 ok':>8}")
    for throttled in (True, False):
        for name, flags in (("pushback", []), ("no pushback", ["--no-pushback"])):
            result = run(binary, flags, throttled)
            print(f"{name:<12} {'yes' if throttled else 'no':<11} {result['calls']:>6} "
                  f"{result['attempts_per_call']:>14.2f} {result['success']:>8.1%} {result['p50_ms']:>6.0f}ms")


if __name__ == "__main__":
    main()
