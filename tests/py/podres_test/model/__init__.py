# SPDX-License-Identifier: Apache-2.0
"""podres_test.model - test 65's model of podresd's write API (run it as
`python3 -m podres_test.model`; __main__.py says how). env: the run's
parameters and shared state; clients: the requests; watchers: the change
feed's readers; check: what the run is held to. Not a fixture other tests
share.
"""
