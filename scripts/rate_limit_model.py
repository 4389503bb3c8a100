#!/usr/bin/env python3
"""A model of bench section 5's rate-limit shape (issue 54), to find its floor.

The stand-in API serves CAP requests at once, SERVICE seconds each, and answers 429 with
Retry-After: RA at once above that. Each of N items is an agent that spends STARTUP seconds
(±15 %) before its one request, then ends; a 429 sends its item back for RA seconds. The
bound the bench reports against is N × SERVICE / CAP.

Three admission policies, 20 seeded runs each (median and worst, over the bound; 429s):
  gate     the rules of src/schedule/gate.rs (docs/DESIGN.md §6a): halving per burst, the
           burst settling at what was served, credit, probes with doubling waits;
  fixed L  after the first burst, exactly L attempts at once and nothing learned — the best
           any limit on attempts at once can do, with L chosen after the fact;
  pace P   after the first burst, one start every P seconds whatever is running — the best a
           gate pacing starts could do, with P chosen after the fact (an oracle).

Usage: scripts/rate_limit_model.py [STARTUP …]   (default 0.02 0.17 0.35: curl, Python, slower)
"""
import heapq
import random
import sys

CAP, SERVICE, RA, N, JOBS = 2, 0.5, 1.0, 48, 8


class Sim:
    def __init__(self, startup, seed):
        self.rnd = random.Random(seed)
        self.startup = startup
        self.events, self.seq, self.t = [], 0, 0.0
        self.ready = list(range(N))
        self.api = self.active = self.done = self.n429 = 0

    def push(self, at, kind, data=None):
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, data))

    def start(self, tag):
        self.active += 1
        item = self.ready.pop(0)
        self.push(self.t + self.startup * self.rnd.uniform(0.85, 1.15), "call", (item, tag))

    def run(self, policy):
        policy.admit(self)
        while self.events:
            self.t, _, kind, data = heapq.heappop(self.events)
            if kind == "call":
                if self.api < CAP:
                    self.api += 1
                    self.push(self.t + SERVICE, "ok", data)
                else:
                    self.n429 += 1
                    self.active -= 1
                    self.push(self.t + RA, "back", data[0])
                    policy.limited(self, data[1])
            elif kind == "ok":
                self.api -= 1
                self.active -= 1
                self.done += 1
                if self.done == N:
                    return self.t, self.n429
                policy.served(self, data[1])
            elif kind == "back":
                self.ready.append(data)
            policy.admit(self)
        return self.t, self.n429


class Gate:
    """docs/DESIGN.md §6a, as src/schedule/gate.rs applies it."""

    def __init__(self):
        self.limit, self.epoch, self.credit, self.streak, self.rounds = JOBS, 0, 0, 0, 2
        self.probing_from = self.probe_epoch = self.burst = None
        self.paused_until = 0.0

    def admit(self, s):
        while s.ready and s.active < min(self.limit, JOBS) and s.t >= self.paused_until:
            if self.burst and self.burst["epoch"] == self.epoch:
                self.burst["running"] += 1
            s.start(self.epoch)

    def burst_member_ended(self, epoch, served):
        b = self.burst
        if b is None or b["epoch"] != epoch:
            return False
        b["running"] -= 1
        b["served"] += served
        if b["running"] <= 0:
            if b["served"]:
                self.limit = b["served"]
            self.burst = None
        return True

    def limited(self, s, epoch):
        if self.burst_member_ended(epoch, 0):
            return
        if self.credit > 0:
            self.credit -= 1
            self.streak = 0
            return
        if self.probe_epoch is not None and epoch in (self.probe_epoch, self.probe_epoch - 1):
            if self.probing_from is not None:
                self.limit, self.probing_from = self.probing_from, None
                self.streak, self.rounds = 0, min(self.rounds * 2, 16)
                self.epoch += 1
            return
        self.streak = 0
        if epoch == self.epoch:
            self.burst = {"epoch": self.epoch, "running": s.active, "served": 0}
            self.limit = (self.limit + 1) // 2
            self.credit, self.epoch = 0, self.epoch + 1
            self.probing_from = self.probe_epoch = None
        self.paused_until = max(self.paused_until, s.t + RA)
        s.push(s.t + RA, "tick")

    def served(self, s, epoch):
        if not self.burst_member_ended(epoch, 1) and self.epoch > 0:
            self.credit = min(self.credit + 1, self.limit)
        self.streak += 1
        if self.streak >= self.rounds * self.limit:
            self.probing_from = None
            if self.limit < JOBS:
                self.probing_from, self.limit = self.limit, self.limit + 1
                self.epoch += 1
                self.probe_epoch = self.epoch
            self.streak = 0


class Fixed:
    """JOBS at once until the first 429, a pause of RA, then exactly `limit` at once."""

    def __init__(self, limit):
        self.limit, self.paused_until, self.learned = limit, None, False

    def admit(self, s):
        if self.paused_until is not None and s.t < self.paused_until:
            return
        cap = self.limit if self.learned else JOBS
        while s.ready and s.active < cap:
            s.start(0)

    def limited(self, s, _tag):
        if not self.learned:
            self.learned, self.paused_until = True, s.t + RA
            s.push(self.paused_until, "tick")

    def served(self, s, _tag):
        pass


class Pace(Fixed):
    """JOBS at once until the first 429, a pause of RA, then one start every `period` s."""

    def __init__(self, period):
        super().__init__(JOBS)
        self.period, self.next_start = period, 0.0

    def admit(self, s):
        if not self.learned:
            return super().admit(s)
        while s.ready and s.active < JOBS and s.t >= self.next_start - 1e-9:
            s.start(0)
            self.next_start = max(self.next_start, s.t) + self.period
        if s.ready:
            s.push(max(self.next_start, s.t) + 1e-6, "tick")

    def limited(self, s, tag):
        if not self.learned:
            super().limited(s, tag)
            self.next_start = self.paused_until


def main():
    bound = N * SERVICE / CAP
    startups = [float(a) for a in sys.argv[1:]] or [0.02, 0.17, 0.35]
    policies = [("gate", Gate)]
    policies += [(f"fixed {n}", lambda n=n: Fixed(n)) for n in (2, 3, 4)]
    policies += [(f"pace {p:.2f}", lambda p=p: Pace(p)) for p in (0.25, 0.26, 0.28, 0.30)]
    print(f"{N} items, {CAP} at once, {SERVICE} s each, 429 + Retry-After {RA} s; bound {bound} s")
    for startup in startups:
        floor = (startup + SERVICE) / SERVICE
        print(f"\nstart-up {startup:.2f} s (2 at once, no 429 after the first burst: ≥ {floor:.2f}×)")
        for name, make in policies:
            runs = sorted(Sim(startup, seed).run(make()) for seed in range(20))
            spans = sorted(r[0] / bound for r in runs)
            limited = sorted(r[1] for r in runs)
            print(f"  {name:10s} {spans[10]:.2f}× (worst {spans[-1]:.2f}×), {limited[10]} × 429")


if __name__ == "__main__":
    main()
