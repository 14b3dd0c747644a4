"""`manage.py create_gateway_key --route NAME --client NAME`: a gateway key, printed once (issue 29)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayRoute


class Command(BaseCommand):
    help = "Create a gateway key for a route and print it once (only its SHA-256 is stored)."

    def add_arguments(self, parser):
        parser.add_argument("--route", required=True, help="the route's name")
        parser.add_argument("--client", required=True, help="who uses the key (shown on the fleet board)")

    def handle(self, *args, route, client, **options):
        found = GatewayRoute.objects.filter(name=route).first()
        if found is None:
            raise CommandError(f"no gateway route named {route!r} (create one in the admin: Gateway routes)")
        new = do_create_gateway_key(route=found, client_name=client)
        self.stdout.write(new.key)
