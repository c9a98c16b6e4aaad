from django.urls import path

from studio.sharing import api, pages

urlpatterns = [
    path("share/<str:token>/", pages.shared_run_page, name="share-run"),
    path("share/<str:token>/prompts/", pages.shared_prompts_page, name="share-run-prompts"),
    path("compare/", pages.compare_page, name="compare"),
    path("api/runs/<int:run_id>/notes/", api.RunNotesView.as_view(), name="run-notes"),
    path("api/notes/<int:note_id>/", api.NoteView.as_view(), name="note"),
    path("api/runs/<int:run_id>/share-links/", api.RunShareLinksView.as_view(), name="run-share-links"),
    path("api/share-links/<int:link_id>/revoke/", api.RevokeShareLinkView.as_view(), name="share-link-revoke"),
    path("api/compare/", api.CompareView.as_view(), name="compare-api"),
]
