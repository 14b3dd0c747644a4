#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main():
    from compactweb.startup_gc import pause_collector

    pause_collector()  # until Django's apps are ready: see compactweb/startup_gc.py
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, as a shell command would
        sys.exit(130)


if __name__ == "__main__":
    main()
