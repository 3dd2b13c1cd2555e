"""HTTP requests and wall time of one PR probe round on the fake GitHub, with latency.

Probes 1, 10 and 50 folders (one repository and one open PR each, a check rule on every
repository) two ways, through the same fake server with the same injected latency per
request (default 50 ms):

- `graphql`: `probes.github.GitHubPullRequestSource` — one query for all folders;
- `rest`: what a REST-only client needs per PR: the pull, its head's check runs, the
  combined status and the reviews (4 requests per PR, sequential), which still lacks
  review threads (REST does not say whether a thread is resolved).

    .venv/bin/python benchmarks/probe_requests.py [--latency 0.05] [--folders 1,10,50]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import httpx

from delivery.testing.github import CheckRule, FakeGitHub, Tree
from probes.evidence import PrQuery
from probes.github import GitHubPullRequestSource


def _no_bug(tree: Tree) -> bool:
    return "BUG" not in (tree.read("app.py") or "")


def setup(fake: FakeGitHub, folders: int) -> list[PrQuery]:
    queries = []
    for i in range(folders):
        name = f"octo/repo{i}"
        fake.create_repo(name, check_rules=(CheckRule("ci", predicate=_no_bug),))
        fake.push_files(name, "delivery/T-1", {"app.py": f"print({i})\n"})
        number = fake.open_pull(name, "delivery/T-1")
        queries.append(PrQuery(f"f{i}", name, number=number))
    return queries


def graphql_round(fake: FakeGitHub, queries: list[PrQuery]) -> None:
    source = GitHubPullRequestSource(fake.token, graphql_url=fake.graphql_url)
    seen = source.pull_requests(queries)
    assert all(not isinstance(v, Exception) and v is not None for v in seen.values())


def rest_round(fake: FakeGitHub, queries: list[PrQuery]) -> None:
    headers = {"Authorization": f"token {fake.token}"}
    with httpx.Client(base_url=fake.api_url, headers=headers) as client:
        for query in queries:
            base = f"/repos/{query.repository}"
            pull = client.get(f"{base}/pulls/{query.number}").raise_for_status().json()
            sha = pull["head"]["sha"]
            client.get(f"{base}/commits/{sha}/check-runs").raise_for_status()
            client.get(f"{base}/commits/{sha}/status").raise_for_status()
            client.get(f"{base}/pulls/{query.number}/reviews").raise_for_status()


def measure(fake: FakeGitHub, round_: Callable[[FakeGitHub, list[PrQuery]], None],
            queries: list[PrQuery], repeats: int) -> tuple[int, float]:
    times = []
    requests = 0
    for _ in range(repeats):
        fake.clear_requests()
        start = time.perf_counter()
        round_(fake, queries)
        times.append(time.perf_counter() - start)
        requests = len(fake.requests)
    return requests, statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--folders", default="1,10,50")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.folders.split(",")]
    with FakeGitHub() as fake:
        queries = setup(fake, max(sizes))
        graphql_round(fake, queries)  # warm-up: builds the schema, runs the checks once
        fake.latency = args.latency
        print(f"latency {args.latency * 1000:.0f} ms per request; median of {args.repeats}")
        print(f"{'folders':>7} | {'graphql req':>11} {'time':>8} | {'rest req':>8} "
              f"{'time':>8} | {'time ratio':>10}")
        for size in sizes:
            g_requests, g_time = measure(fake, graphql_round, queries[:size], args.repeats)
            r_requests, r_time = measure(fake, rest_round, queries[:size], args.repeats)
            print(f"{size:>7} | {g_requests:>11} {g_time:>7.3f}s | {r_requests:>8} "
                  f"{r_time:>7.3f}s | {r_time / g_time:>9.1f}x")


if __name__ == "__main__":
    main()
