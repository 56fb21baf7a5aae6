"""python3 -m zdist [--keys DIR] [--key NAME] [--server-key NAME] submit|status|cancel ...

The `zdist` CLI's submit, status and cancel (cli/cli_submit.c,
cli_status.c, cli_cancel.c) in Python: the same options, output and exit
status (0 done, 1 failed or cancelled or unreachable, 2 bad job or usage).
"""

import argparse
import json
import os
import sys
import time

from .client import FINAL_STATES, Client
from .errors import ZdistError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _chief(args):
    if args.coordinator:
        return args.coordinator
    if args.cluster:
        try:
            with open(args.cluster, encoding="utf-8") as f:
                chiefs = json.load(f).get("cluster", {}).get("chief") or []
        except (OSError, ValueError) as e:
            raise SystemExit(_usage(args.cmd, "--cluster %s: %s" % (args.cluster, e)))
        if not chiefs:
            raise SystemExit(_usage(args.cmd, "no chief task in %s; pass --coordinator HOST:PORT" % args.cluster))
        return chiefs[0]
    if not os.environ.get("TF_CONFIG"):
        raise SystemExit(_usage(args.cmd, "no TF_CONFIG; pass --coordinator HOST:PORT or --cluster FILE"))
    return None


def _usage(cmd, msg):
    print("zdist %s: %s" % (cmd, msg), file=sys.stderr)
    return EXIT_USAGE


def _print_status(st, tasks):
    m = st.get("metrics") or {}
    line = "job %s (%s): %s, step %d/%d" % (st["job_id"], st["name"], st["state"], st["step"], st["steps"])
    if "loss" in m:
        line += ", loss %.4f" % m["loss"]
    if "examples_per_sec" in m:
        line += ", %.0f examples/s" % m["examples_per_sec"]
    if "test_accuracy" in m:
        line += ", test accuracy %.4f" % m["test_accuracy"]
    print(line)
    if st.get("error"):
        print("  error: %s" % st["error"])
    if st.get("waiting"):
        print("  queued: %s" % st["waiting"])
    if not tasks:
        return
    for w in st.get("workers") or []:
        print("  worker %s %s: %s, %s closures done, %s in flight, %s rejoins"
              % (w.get("task"), w.get("endpoint"), w.get("state", "up" if w.get("up") else "down"),
                 w.get("closures_done", 0), w.get("in_flight", 0), w.get("restarts", 0)))
    for p in st.get("ps") or []:
        print("  ps %s %s: %s bytes held, %s requests" % (p.get("task"), p.get("endpoint"), p.get("bytes", 0),
                                                           p.get("requests", 0)))


class _Progress:
    """cli_coord_progress: a bar on a terminal, else a line every 10% or 5 s."""

    def __init__(self, tty):
        self.tty = tty
        self.last = None
        self.last_step = 0
        self.t0 = None
        self.first = None

    def show(self, st):
        step, steps = st["step"], st["steps"]
        if st["state"] != "running" or steps <= 0 or step <= 0:
            return
        now = time.monotonic()
        if self.first is None or step < self.first:
            self.first, self.t0 = step, now
        loss = st["metrics"].get("loss")
        loss = "%.4f" % loss if isinstance(loss, (int, float)) else "-"
        done = step - self.first
        eta = "%.0fs" % ((now - self.t0) * (steps - step) / done) if done > 0 and steps >= step else "-"
        eps = st["metrics"].get("examples_per_sec", 0)
        if self.tty:
            fill = 30 * step // steps
            sys.stderr.write("\r[%s%s] %d/%d loss %s %.0f ex/s ETA %s %s   "
                             % ("#" * fill, "." * (30 - fill), step, steps, loss, eps, eta, st["state"]))
            sys.stderr.flush()
        elif self.last is None or now - self.last >= 5 or (step - self.last_step) * 10 >= steps:
            print("step %d/%d loss %s examples/s %.0f eta %s (%s)" % (step, steps, loss, eps, eta, st["state"]),
                  flush=True)
            self.last, self.last_step = now, step


def _follow(client, job_id, show, tty):
    prog = _Progress(tty)
    last = None
    for last in client.follow(job_id):
        if show:
            prog.show(last)
    if tty:
        sys.stderr.write("\n")
    return last


def _failure(cmd, client, e):
    print("zdist %s: coordinator %s: %s: %s" % (cmd, client.endpoint, e.status, e.message), file=sys.stderr)
    return EXIT_USAGE if e.status == "INVALID_ARGUMENT" else EXIT_FAILED


def cmd_submit(args, client):
    try:
        job = client.submit(args.job)
    except OSError as e:
        return _usage("submit", "cannot read '%s': %s" % (args.job, e.strerror))
    except ZdistError as e:
        print("zdist submit: %s: %s" % (args.job, e.message), file=sys.stderr)
        return EXIT_USAGE if e.status == "INVALID_ARGUMENT" else EXIT_FAILED
    if args.detach:
        print(json.dumps({"job_id": job.id, "state": "queued"}) if args.json else job.id)
        return EXIT_OK
    if not args.json:
        print("job %s submitted to %s" % (job.id, client.endpoint), flush=True)
    st = _follow(client, job.id, not args.json, not args.json and sys.stderr.isatty())
    if args.json:
        print(json.dumps(st, separators=(",", ":")))
    else:
        _print_status(st, False)
        if "test_accuracy" in st["metrics"]:
            print("test accuracy: %.4f" % st["metrics"]["test_accuracy"])
        print("metrics, checkpoints and loss.svg: %s" % st.get("dir"))
    return EXIT_OK if st["state"] == "done" else EXIT_FAILED


def cmd_status(args, client):
    job = args.job or ""
    if args.follow:
        st = _follow(client, job, not args.json, not args.json and sys.stderr.isatty())
        code = EXIT_OK if st["state"] == "done" else EXIT_FAILED
    else:
        st = client.status(job)
        code = EXIT_OK
        if not job:
            unfinished = [client.status(j["job_id"]) for j in client.jobs() if j["state"] not in FINAL_STATES]
            if len(unfinished) >= 2:
                if not args.json:
                    for one in unfinished:
                        _print_status(one, True)
                    return EXIT_OK
                st["jobs"] = unfinished
    if args.json:
        print(json.dumps(st, separators=(",", ":")))
    else:
        _print_status(st, True)
    return code


def cmd_cancel(args, client):
    try:
        state = client.cancel(args.job)
    except ZdistError as e:
        print("zdist cancel: %s: %s" % (e.status, e.message), file=sys.stderr)
        return EXIT_USAGE if e.status in ("NOT_FOUND", "INVALID_ARGUMENT") else EXIT_FAILED
    print("job %s: %s" % (args.job, state))
    return EXIT_OK


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m zdist", description="zdist's submit, status and cancel in Python")
    p.add_argument("--keys", default=os.environ.get("ZDIST_KEYS_DIR") or None,
                   help="speak CURVE with the certificates of DIR (default $ZDIST_KEYS_DIR)")
    p.add_argument("--key", default="client", help="this client's certificate DIR/NAME.key_secret (default client)")
    p.add_argument("--server-key", help="the certificate NAME to trust at the coordinator's address")
    sub = p.add_subparsers(dest="cmd", required=True)

    def conn(sp):
        sp.add_argument("--coordinator", metavar="HOST:PORT")
        sp.add_argument("--cluster", metavar="FILE")

    s = sub.add_parser("submit", help="send a job to zdist-coordinator and follow it to its end")
    s.add_argument("job", metavar="JOB.json")
    conn(s)
    s.add_argument("--detach", action="store_true", help="print the job id and return at once")
    s.add_argument("--json", action="store_true", help="print one JSON object at the end")
    s = sub.add_parser("status", help="a job's state, step, metrics, workers and ps tasks")
    s.add_argument("job", nargs="?", metavar="JOB")
    conn(s)
    s.add_argument("--follow", action="store_true", help="show progress until the job ends")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("cancel", help="cancel a queued or running job")
    s.add_argument("job", metavar="JOB")
    conn(s)
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        client = Client(_chief(args), keys=args.keys, key=args.key, server_key=args.server_key)
    except ValueError as e:
        print("zdist: --keys: %s" % e if args.keys else "zdist %s: %s" % (args.cmd, e), file=sys.stderr)
        return EXIT_FAILED
    try:
        return {"submit": cmd_submit, "status": cmd_status, "cancel": cmd_cancel}[args.cmd](args, client)
    except ZdistError as e:
        return _failure(args.cmd, client, e)
    except KeyboardInterrupt:
        print("zdist %s: interrupted" % args.cmd, file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
