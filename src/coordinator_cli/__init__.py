"""`coordinator`, the command line: the top layer, over the streaming job, the chaos harness and the client.

`main.main` parses the command and hands it to its module. May import every package (the lab too, for
`coordinator bench`); nothing imports it.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
