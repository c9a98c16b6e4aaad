from django.urls import path

from studio.serving import api, exports, pages

urlpatterns = [
    path("v1/models", api.models, name="v1-models"),
    path("v1/chat/completions", api.chat_completions, name="v1-chat-completions"),
    path("v1/completions", api.completions, name="v1-completions"),
    path("teams/<int:team_id>/api-tokens/", pages.api_tokens, name="team-api-tokens"),
    path("runs/<int:run_id>/playground/", pages.playground, name="run-playground"),
    path("runs/<int:run_id>/playground/generate", pages.playground_generate, name="run-playground-generate"),
    path("runs/<int:run_id>/playground/save", pages.playground_save, name="run-playground-save"),
    path("runs/<int:run_id>/playground/save-row", pages.playground_save_row, name="run-playground-save-row"),
    path("runs/<int:run_id>/export/", exports.export_page, name="run-export"),
    path("runs/<int:run_id>/export/<str:name>", exports.export_download, name="run-export-download"),
]
