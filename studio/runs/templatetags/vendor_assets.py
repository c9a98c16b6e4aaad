"""`{% plotly_js_url %}`: the versioned URL of the studio-served plotly.js."""

from django import template
from django.urls import reverse

from studio.runs.plotly import plotly_version

register = template.Library()


@register.simple_tag
def plotly_js_url() -> str:
    return f"{reverse('plotly-js')}?v={plotly_version()}"
