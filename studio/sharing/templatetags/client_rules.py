"""`{% client_rules as rules %}`: the rules payload of studio.sharing.client_rules, for a template to
hand its JS (`{{ rules|json_script:"client-rules" }}`) and to use itself (the note form's maxlength),
so pages carry it without their views knowing."""

from typing import Any

from django import template

from studio.sharing.client_rules import client_rules as build

register = template.Library()


@register.simple_tag
def client_rules() -> dict[str, Any]:
    return build()
