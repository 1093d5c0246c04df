"""Schema-driven fuzzing (schemathesis) of the served OpenAPI: no 5xx, every answer fits the schema.

Each operation gets a bounded number of generated requests (``EXAMPLES``, valid and invalid ones
alike: invalid input must be refused with a documented 4xx, never a 5xx), sent with the admin key
to a real home with data; path parameters are pointed at real accounts and sandboxes half the time
so the fuzzing reaches the engine, not only the 404s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from server_world import build_world

EXAMPLES = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_fuzz_the_served_openapi(tmp_path: Path) -> None:
    world = build_world(tmp_path / "home")
    schema = schemathesis.openapi.from_asgi("/openapi.json", world.app())
    real = {"account": ["ann", "bob"], "sandbox_id": [world.ann.sandbox_id, world.bob.sandbox_id],
            "ref": [world.ann.record_id, "core", "state:ire"], "name": ["ire"], "key_id": [world.bob.key_id]}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    calls = 0
    for operation in operations:

        @given(case=st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                              operation.as_strategy(GenerationMode.NEGATIVE)), pick=st.data())
        @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        def fuzz(case: schemathesis.Case, pick: st.DataObject) -> None:
            nonlocal calls
            if case.path_parameters and pick.draw(st.booleans()):
                for name in case.path_parameters:
                    if name in real:
                        case.path_parameters[name] = pick.draw(st.sampled_from(real[name]))
            case.call_and_validate(headers={"Authorization": f"Bearer {world.admin_key}"}, checks=CHECKS)
            calls += 1

        fuzz()
    assert calls >= len(operations) * 2
