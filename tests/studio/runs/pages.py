"""Reading the rollout list's pages as the inspector does: `url` for a query, `walk` to follow next_cursor."""


def url(run, **params) -> str:
    return f"/api/runs/{run.pk}/rollouts/?" + "&".join(f"{k}={v}" for k, v in params.items())


def walk(api, run, cursor=None, **params) -> list[int]:
    """Every id the pages return (from `cursor` on), following next_cursor."""
    ids = []
    while True:
        body = api.get(url(run, **params, **({"cursor": cursor} if cursor else {}))).json()
        ids += [r["id"] for r in body["results"]]
        cursor = body["next_cursor"]
        if not cursor:
            return ids
