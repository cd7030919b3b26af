"""The published OpenAPI schema: stable operation ids for every route, examples that
are valid requests and responses, and the error `code` as an enum that lists every code
the domain errors can carry."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from pydantic import BaseModel

import strands_durable
from strands_durable.api import schemas
from strands_durable.api.app import create_app
from strands_durable.api.errors import ERROR_CODES
from strands_durable.api.schemas_quotas import QuotaSetRequest
from strands_durable.errors import DurableError
from strands_durable.settings import DurableSettings


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    doc: dict[str, Any] = create_app(DurableSettings()).openapi()
    return doc


def operations(openapi: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for path in openapi["paths"].values() for op in path.values()]


def test_every_operation_has_a_listed_stable_id(openapi: dict[str, Any]) -> None:
    ids = [op["operationId"] for op in operations(openapi)]
    assert sorted(ids) == sorted(schemas.OPERATION_IDS.values())
    assert len(set(ids)) == len(ids)


def _subclasses(cls: type[DurableError]) -> set[type[DurableError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_error_code_enum_lists_every_domain_error_code(openapi: dict[str, Any]) -> None:
    # Import every module so that every error class is defined.
    for module in pkgutil.walk_packages(strands_durable.__path__, "strands_durable."):
        if ".cli" not in module.name:
            importlib.import_module(module.name)
    codes = {cls.code for cls in _subclasses(DurableError)}
    assert codes - set(ERROR_CODES) == set()
    enum = openapi["components"]["schemas"]["ErrorInfo"]["properties"]["code"]["enum"]
    assert enum == list(ERROR_CODES) and len(set(enum)) == len(enum)


@pytest.mark.parametrize("model", [schemas.SubmitRequest, schemas.ResumeRequest,
                                   schemas.SignalRequest, schemas.RequeueRequest,
                                   schemas.SubmitResponse, schemas.ActionResponse,
                                   schemas.ForkResponse, schemas.ErrorResponse,
                                   QuotaSetRequest])
def test_examples_are_valid_documents_of_their_model(model: type[BaseModel]) -> None:
    examples = model.model_json_schema().get("examples")
    assert examples, f"{model.__name__} has no example"
    for example in examples:
        model.model_validate(example)


def test_request_bodies_and_errors_show_examples(openapi: dict[str, Any]) -> None:
    components = openapi["components"]["schemas"]
    for name in ("SubmitRequest", "ResumeRequest", "SignalRequest", "RequeueRequest",
                 "ErrorResponse", "SubmitResponse"):
        assert components[name].get("examples"), name
    for op in operations(openapi):
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")) and op["operationId"] != "getHealth":
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorResponse"), (op["operationId"], status)


def test_each_error_status_shows_examples_of_its_own_codes(openapi: dict[str, Any]) -> None:
    for op in operations(openapi):
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")) and op["operationId"] != "getHealth":
                examples = response["content"]["application/json"]["examples"]
                assert list(examples) == [c for c, _, _ in schemas.ERROR_EXAMPLES[int(status)]]
                for code, example in examples.items():
                    schemas.ErrorResponse.model_validate(example["value"])
                    assert example["value"]["error"]["code"] == code and code in ERROR_CODES
