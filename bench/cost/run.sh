#!/usr/bin/env bash
# The planner with this machine's measured cost table against a measured training step (one
# thread); argument: the build folder.
exec /usr/bin/python3 "$(dirname "$0")/reproduce_step.py" "${1:-build}/src/cli/trident"
