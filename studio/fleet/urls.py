"""Included at the site root by studio.front_urls."""

from django.urls import path

from studio.fleet.views import fleet_page

urlpatterns = [path("fleet/", fleet_page, name="fleet")]
