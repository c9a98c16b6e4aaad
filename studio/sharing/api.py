"""JSON API of notes, share links and compare.

    GET/POST /api/runs/<id>/notes/          list (?rollout=&tag=&q=) / add (owners, editors)
    DELETE   /api/notes/<id>/               the author or a team owner
    GET/POST /api/runs/<id>/share-links/    owners and editors
    POST     /api/share-links/<id>/revoke/  owners and editors; closes live websockets
    GET      /api/compare/?runs=1,2,3       team members of every run

Reads accept a share token (`?share=`) through readable_run; writes never do.
"""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated, IsAuthenticatedOrReadOnly
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from studio.accounts.models import OWNER
from studio.accounts.permissions import EDIT, check, role_in
from studio.lib.api_schema import ERROR_404, SHARE, id_parameter
from studio.lib.fields import IdField
from studio.lib.params import as_id
from studio.runs.access import readable_run, viewable_run
from studio.runs.models import Rollout, Run
from studio.runs.table import seed_groups
from studio.sharing.compare import differences
from studio.sharing.models import TAG_MAX, TEXT_MAX, Note, ShareLink, notes_changed
from studio.sharing.share_view import ShareViewMixin

MAX_COMPARE = 12
NOTES_LIMIT = 500


def _may_delete(user, note: Note, is_team_owner: bool) -> bool:
    """A note goes away at the hand of its author or of an owner of the run's team."""
    return user.is_authenticated and (is_team_owner or note.author_id == user.pk)


class NoteIn(serializers.Serializer):
    text = serializers.CharField(max_length=TEXT_MAX, trim_whitespace=True)
    tag = serializers.CharField(max_length=TAG_MAX, required=False, allow_blank=True, default="")
    rollout = IdField(
        required=False, allow_null=True, default=None, help_text="A rollout of this run the note is about."
    )


class NoteOut(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField()
    rollout = serializers.IntegerField(allow_null=True)
    rollout_step = serializers.IntegerField(allow_null=True)
    author = serializers.CharField()
    tag = serializers.CharField(allow_blank=True)
    text = serializers.CharField()
    created = serializers.DateTimeField()
    can_delete = serializers.BooleanField()


class ShareLinkOut(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField()
    label = serializers.CharField(allow_blank=True)
    url = serializers.CharField(allow_null=True, help_text="The page the link opens; null once revoked.")
    token = serializers.CharField(allow_null=True, help_text="null once revoked.")
    created_by = serializers.CharField()
    created = serializers.DateTimeField()
    revoked = serializers.BooleanField()


NOTES = inline_serializer("NoteList", {"results": NoteOut(many=True)})
LINKS = inline_serializer("ShareLinkList", {"results": ShareLinkOut(many=True)})
COMPARED = inline_serializer("Comparison", {
    "runs": serializers.ListField(child=serializers.DictField(), help_text="Each run's summary, in the order asked."),
    "differences": serializers.ListField(child=inline_serializer("Difference", {
        "path": serializers.CharField(help_text='A dotted setting, e.g. "optim.lr".'),
        "values": serializers.ListField(child=serializers.JSONField(), help_text="Each run's value, in order."),
    }), help_text="The settings where the runs differ."),
    "groups": serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                    help_text="The runs' ids by settings without optim.seed: seed repeats together."),
})  # fmt: skip
RUN_ID = id_parameter("run_id", "The run.", OpenApiParameter.PATH)


class RunNotesView(ShareViewMixin, APIView):
    # Reads: readable_run decides (members, or a share link). Writes: signed in (anonymous: 403,
    # as everywhere in the API), then check(..., EDIT).
    permission_classes = [IsAuthenticatedOrReadOnly]

    @extend_schema(parameters=[RUN_ID, id_parameter("rollout", "Only the notes on this rollout."),
                               OpenApiParameter("tag", str, description="Only notes of this tag."),
                               OpenApiParameter("q", str, description="Text in the note or its tag, any case."), SHARE],
                   responses=NOTES)  # fmt: skip
    def get(self, request: Request, run_id: int) -> Response:
        run = readable_run(request, run_id)
        notes = Note.objects.filter(run=run).select_related("rollout", "author")
        params = request.query_params
        if params.get("rollout"):
            rollout_id = as_id(params["rollout"])
            if rollout_id is None:
                raise ValidationError({"rollout": f"must be a rollout id, got {params['rollout']!r}"})
            notes = notes.filter(rollout_id=rollout_id)
        if params.get("tag"):
            notes = notes.filter(tag=params["tag"])
        if params.get("q"):
            notes = notes.filter(Q(text__icontains=params["q"]) | Q(tag__icontains=params["q"]))
        is_owner = role_in(request.user, run.team_id) == OWNER
        return Response({"results": [n.as_dict(_may_delete(request.user, n, is_owner)) for n in notes[:NOTES_LIMIT]]})

    @extend_schema(parameters=[RUN_ID], request=NoteIn, responses={201: NoteOut})
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        check(request.user, run, EDIT)
        data = NoteIn(data=request.data)
        data.is_valid(raise_exception=True)
        rollout = None
        if data.validated_data["rollout"] is not None:
            rollout = Rollout.objects.filter(run=run, pk=data.validated_data["rollout"]).first()
            if rollout is None:
                raise ValidationError({"rollout": f"run {run.pk} has no rollout {data.validated_data['rollout']}"})
        note = Note.objects.create(
            run=run,
            rollout=rollout,
            author=request.user,
            tag=data.validated_data["tag"],
            text=data.validated_data["text"],
        )
        notes_changed(run.pk, note.pk)
        return Response(note.as_dict(can_delete=True), status=status.HTTP_201_CREATED)


class NoteView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[id_parameter("note_id", "The note.", OpenApiParameter.PATH)], responses={204: None})
    def delete(self, request: Request, note_id: int) -> Response:
        note = get_object_or_404(Note.objects.select_related("run"), pk=note_id)
        role = role_in(request.user, note.run.team_id)
        if role is None:
            raise Http404("not found")
        if not _may_delete(request.user, note, role == OWNER):
            return Response({"detail": "only the author or a team owner deletes a note"}, status=403)
        run_id, note_pk = note.run_id, note.pk
        note.delete()
        notes_changed(run_id, note_pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ShareLinkIn(serializers.Serializer):
    label = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class RunShareLinksView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[RUN_ID], responses=LINKS)
    def get(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        check(request.user, run, EDIT)
        links = run.share_links.select_related("created_by")
        return Response({"results": [link.as_dict() for link in links]})

    @extend_schema(parameters=[RUN_ID], request=ShareLinkIn, responses={201: ShareLinkOut})
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        check(request.user, run, EDIT)
        data = ShareLinkIn(data=request.data)
        data.is_valid(raise_exception=True)
        link = ShareLink.objects.create(run=run, label=data.validated_data["label"], created_by=request.user)
        return Response(link.as_dict(), status=status.HTTP_201_CREATED)


class RevokeShareLinkView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[id_parameter("link_id", "The share link.", OpenApiParameter.PATH)],
        request=None,
        responses=ShareLinkOut,
    )
    def post(self, request: Request, link_id: int) -> Response:
        link = get_object_or_404(ShareLink.objects.select_related("run", "created_by"), pk=link_id)
        check(request.user, link.run, EDIT)
        link.revoke()
        return Response(link.as_dict())


# What parse_run_ids reads: 1 to MAX_COMPARE whole numbers separated by commas (blanks between are skipped).
RUN_IDS = rf"^[ ,]*[0-9]{{1,18}}[ ]*(,[ ,]*[0-9]{{1,18}}[ ]*){{0,{MAX_COMPARE - 1}}}[ ,]*$"


def parse_run_ids(raw: str | None) -> list[int]:
    """`1,2,3` -> [1, 2, 3] (order kept, repeats dropped); a 400 naming `runs` otherwise."""
    try:
        ids = list(dict.fromkeys(int(part) for part in (raw or "").split(",") if part.strip()))
    except ValueError:
        raise ValidationError({"runs": f"must be run ids separated by commas, got {raw!r}"}) from None
    if not ids:
        raise ValidationError({"runs": "pick at least one run"})
    if len(ids) > MAX_COMPARE:
        raise ValidationError({"runs": f"compare at most {MAX_COMPARE} runs at once"})
    return ids


class CompareView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "runs",
                {"type": "string", "pattern": RUN_IDS},
                required=True,
                description=f"Run ids separated by commas, 1 to {MAX_COMPARE} different ones.",
            )
        ],
        responses={200: COMPARED, 404: ERROR_404},
    )
    def get(self, request: Request) -> Response:
        ids = parse_run_ids(request.query_params.get("runs"))
        runs = []
        for run_id in ids:
            run = viewable_run(request.user, run_id)
            if run is None:
                raise Http404(f"run {run_id} not found")
            runs.append(run)
        return Response({"runs": [run.summary() for run in runs], "differences": differences([run.spec for run in runs]),
                         "groups": seed_groups(runs)})  # fmt: skip
