"""The API publishes an OpenAPI schema at /api/v1/openapi.json describing this issue's resources."""

import json


def test_the_schema_is_json_and_lists_the_session_and_config_paths(operator_api):
    response = operator_api.get("/api/v1/openapi.json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    for path in ["/api/v1/sessions", "/api/v1/sessions/{id}", "/api/v1/sessions/{id}/history",
                 "/api/v1/sessions/{id}/items", "/api/v1/sessions/{id}/rollout", "/api/v1/providers",
                 "/api/v1/providers/{id}", "/api/v1/policies", "/api/v1/policies/{id}"]:
        assert path in schema["paths"], path
    provider = schema["components"]["schemas"]["Provider"]["properties"]
    assert "api_key_env" in provider and "api_key" not in provider
