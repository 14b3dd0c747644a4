"""Create a user with a role and print an API token (design: per-user API tokens)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from compactweb.api_tokens import issue_token
from compactweb.roles import ADMIN, ROLES


class Command(BaseCommand):
    help = "Create a user in a role group (operator, support or admin) and print their API token."

    def add_arguments(self, parser):
        parser.add_argument("--username", required=True)
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--password", help="Login password for the web pages (omit for an API-only user).")

    def handle(self, *args, username: str, role: str, password: str | None, **options):
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            raise CommandError(f"user {username!r} already exists")
        user = User(username=username, is_staff=role == ADMIN)
        if password:
            # The deployment's AUTH_PASSWORD_VALIDATORS, as the admin's and the password-change forms apply them.
            try:
                validate_password(password, user=user)
            except ValidationError as exc:
                raise CommandError("password refused: " + " ".join(exc.messages)) from None
        with transaction.atomic():
            if password:
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
            user.groups.add(Group.objects.get(name=role))
            token = issue_token(user=user)
        self.stdout.write(f"created {role} {username}")
        # Only the token's hash is stored: this is the one time it is shown.
        self.stdout.write(f"token: {token}")
