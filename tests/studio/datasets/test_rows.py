"""A playground conversation saved as a dataset row (studio.datasets.rows, through the playground's
save-row view): the row in the dataset's own columns, a new file each time (the old one left for the
runs that read it), a new "Playground conversations" dataset, and what is refused, with nothing kept."""

from __future__ import annotations

import json
from pathlib import Path

from django.test import Client

from studio.datasets import rows, storage
from studio.datasets.models import Dataset
from tests.studio.base import StudioTestCase, write_jsonl

TALK = [
    {"role": "system", "content": "Answer with a number."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And 3 + 3? \"quoted\" </script>"},
    {"role": "assistant", "content": "6"},
]


def lines(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


class SaveRowTest(StudioTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.run = self.make_run(state="succeeded")

    def upload(self, name: str = "prompts.jsonl", **mapping) -> Dataset:
        folder = storage.uploads_dir() / "seed"
        folder.mkdir(parents=True, exist_ok=True)
        path = write_jsonl(folder / name, [{"prompt": "1 + 1?", "answer": "2"}])
        dataset = Dataset(team=self.team, name=name, source="upload", path=str(path), format="jsonl", **mapping)
        storage.refresh(dataset)
        dataset.save()
        return dataset

    def save(self, user, dataset, messages=TALK, run=None):
        client = Client()
        client.force_login(user)
        body = {"model": f"run-{self.run.pk}/base", "messages": messages, "dataset": dataset}
        return client.post(f"/runs/{(run or self.run).pk}/playground/save-row", json.dumps(body),
                           content_type="application/json")  # fmt: skip

    def test_a_prompt_column_gets_the_last_user_message_and_the_answer_the_last_reply(self):
        dataset = self.upload()
        old_path = dataset.path
        response = self.save(self.bob, dataset.pk)
        self.assertEqual(response.status_code, 201, response.content)
        dataset.refresh_from_db()
        self.assertEqual((response.json()["rows"], dataset.row_count), (2, 2))
        self.assertNotEqual(dataset.path, old_path)
        self.assertEqual(lines(dataset.path)[-1], {"prompt": TALK[3]["content"], "answer": "6"})
        # the file a run may have read is as it was
        self.assertEqual(lines(old_path), [{"prompt": "1 + 1?", "answer": "2"}])

    def test_a_messages_column_gets_the_chat_before_the_last_reply(self):
        dataset = self.upload(messages_field="messages", prompt_field="")
        self.assertEqual(self.save(self.alice, dataset.pk).status_code, 201)
        dataset.refresh_from_db()
        self.assertEqual(lines(dataset.path)[-1], {"messages": TALK[:4], "answer": "6"})

    def test_a_new_dataset_is_made_and_a_second_save_goes_to_it(self):
        response = self.save(self.bob, "new")
        self.assertEqual(response.status_code, 201, response.content)
        made = Dataset.objects.get(pk=response.json()["dataset"])
        self.assertEqual((made.name, made.team, made.source, made.row_count), (rows.CONVERSATIONS_NAME, self.team,
                                                                              "upload", 1))  # fmt: skip
        self.assertEqual(self.save(self.bob, made.pk, messages=TALK[:3]).json()["rows"], 2)
        made.refresh_from_db()
        self.assertEqual([r["answer"] for r in lines(made.path)], ["6", "4"])

    def test_a_viewer_cannot_save_and_an_outsider_does_not_find_the_run(self):
        dataset = self.upload()
        self.assertEqual(self.save(self.carol, dataset.pk).status_code, 403)
        self.assertEqual(self.save(self.charlie, dataset.pk).status_code, 404)
        dataset.refresh_from_db()
        self.assertEqual(dataset.row_count, 1)

    def test_another_teams_dataset_is_refused(self):
        theirs = Dataset.objects.create(team=self.other_team, name="theirs", source="upload", format="jsonl",
                                        path=str(self.tmp / "theirs.jsonl"))  # fmt: skip
        response = self.save(self.bob, theirs.pk)
        self.assertEqual((response.status_code, response.json()["error"]["param"]), (400, "dataset"))

    def test_a_server_file_is_the_operators_and_is_not_changed(self):
        response = self.save(self.bob, self.dataset.pk)  # StudioTestCase's dataset: a server file
        self.assertEqual(response.status_code, 400)
        self.assertIn("only the studio's own JSON Lines uploads take rows", response.json()["error"]["message"])
        self.assertEqual(len(lines(self.dataset.path)), self.dataset.row_count)

    def test_no_user_message_is_refused_and_no_new_dataset_is_left(self):
        before = Dataset.objects.count()
        response = self.save(self.bob, "new", messages=[{"role": "system", "content": "hi"}])
        self.assertEqual(response.status_code, 400, response.content)
        self.assertIn("no user message", response.json()["error"]["message"])
        self.assertEqual(Dataset.objects.count(), before)
        self.assertEqual([p.name for p in storage.uploads_dir().glob("*/conversations.jsonl")], [])

    def test_bad_bodies_name_the_field(self):
        self.assertEqual(self.save(self.bob, "7; drop").json()["error"]["param"], "dataset")
        self.assertEqual(self.save(self.bob, self.upload().pk, messages="hi").status_code, 400)
