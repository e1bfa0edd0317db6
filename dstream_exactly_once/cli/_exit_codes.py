"""Exit statuses of ``dstream-eo`` and the text every command's ``--help`` ends with."""

from __future__ import annotations

from .._command_line import EXIT_USAGE

__all__ = ["EXIT_CODES_HELP", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_FAILED = 1
# EXIT_USAGE = 2: a usage error (bad or missing option, bad value), as every parser of the package exits
EXIT_REFUSED = 3
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit status:
  0    success (a dry run included)
  1    the command failed (one line on stderr: store, broker or file error)
  2    usage error (bad or missing option, bad value)
  3    refused: a driver of the app is live (fresh heartbeat); stop it or pass --force
  130  interrupted"""
