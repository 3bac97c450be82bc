"""`python -m kafka_gateway --bootstrap-servers HOST:PORT [--listen HOST:PORT] [--engine local]`: the gateway
alone, with the engine's default configuration (`coordinator gateway` adds the project's configuration)."""

import argparse
import sys

from .cli import DESCRIPTION, add_arguments, run

parser = argparse.ArgumentParser(prog="python -m kafka_gateway", description=DESCRIPTION)
add_arguments(parser)
sys.exit(run(parser.parse_args()))
