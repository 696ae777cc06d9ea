"""`check --junit FILE --sarif FILE` on fake-CUDA runs. The required fields are
checked against the schemas' definitions: SARIF 2.1.0 (sarif-schema-2.1.0.json) and JUnit XML as
the Surefire (surefire-test-report.xsd) and Jenkins (junit-4.xsd) schemas define it."""
import json
import os
import xml.etree.ElementTree as ET

import pytest

from conftest import BUILD, SCENARIOS, site_line

MIB = 1 << 20

# Attributes use="required" in surefire-test-report.xsd or junit-4.xsd (the union of both).
JUNIT_REQUIRED = {
    "testsuite": {"name", "tests", "failures", "errors", "skipped"},
    "testcase": {"name"},
    "failure": {"message", "type"},
}
# Children each element may have in those schemas.
JUNIT_CHILDREN = {
    "testsuites": {"testsuite"},
    "testsuite": {"properties", "testcase", "system-out", "system-err"},
    "properties": {"property"},
    "testcase": {"failure", "error", "skipped", "system-out", "system-err"},
}
SARIF_LEVELS = {"none", "note", "warning", "error"}


def validate_junit(path):
    """Checks the XSDs' required attributes and structure; returns the parsed tree's testcases."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    for element in root.iter():
        missing = JUNIT_REQUIRED.get(element.tag, set()) - set(element.attrib)
        assert not missing, f"<{element.tag}> lacks {missing}"
        allowed = JUNIT_CHILDREN.get(element.tag)
        if allowed is not None:
            assert {c.tag for c in element} <= allowed, (element.tag, [c.tag for c in element])
    suites = root.findall("testsuite")
    assert suites
    cases = []
    for suite in suites:
        suite_cases = suite.findall("testcase")
        # The counts say what the suite holds (xs:int attributes).
        assert int(suite.get("tests")) == len(suite_cases)
        assert int(suite.get("failures")) == sum(1 for c in suite_cases if c.find("failure") is not None)
        assert int(suite.get("errors")) == sum(1 for c in suite_cases if c.find("error") is not None)
        assert int(suite.get("skipped")) == sum(1 for c in suite_cases if c.find("skipped") is not None)
        float(suite.get("time", "0"))
        for case in suite_cases:
            float(case.get("time", "0"))
        cases += suite_cases
    if "tests" in root.attrib:
        assert int(root.get("tests")) == len(cases)
        assert int(root.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    return cases


def validate_location(location):
    physical = location.get("physicalLocation")
    if physical is not None:
        # physicalLocation: "anyOf": [address] or [artifactLocation].
        assert "artifactLocation" in physical or "address" in physical
        assert isinstance(physical["artifactLocation"]["uri"], str)
        if "region" in physical:
            assert isinstance(physical["region"]["startLine"], int) and physical["region"]["startLine"] >= 1
    if "message" in location:
        assert isinstance(location["message"]["text"], str)


def validate_sarif(path):
    """The required properties of sarif-schema-2.1.0.json for what gpumemshim writes."""
    log = json.loads(path.read_text())
    assert log["version"] == "2.1.0"  # "enum": ["2.1.0"], required
    assert log["$schema"].startswith("https://")
    assert isinstance(log["runs"], list) and len(log["runs"]) == 1  # required
    [run] = log["runs"]
    driver = run["tool"]["driver"]  # run requires tool, tool requires driver
    assert isinstance(driver["name"], str) and driver["name"]  # toolComponent requires name
    rule_ids = []
    for rule in driver.get("rules", []):
        assert isinstance(rule["id"], str)  # reportingDescriptor requires id
        rule_ids.append(rule["id"])
    assert len(set(rule_ids)) == len(rule_ids)
    for result in run["results"]:
        # result requires message; message requires text or id.
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        # "ruleId" form: a string; ruleIndex (if given) points at the rule with that id.
        assert isinstance(result["ruleId"], str)
        if "ruleIndex" in result:
            assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result.get("level", "warning") in SARIF_LEVELS
        for location in result.get("locations", []):
            validate_location(location)
        for flow in result.get("codeFlows", []):
            assert flow["threadFlows"]  # codeFlow requires threadFlows (minItems 1)
            for thread_flow in flow["threadFlows"]:
                assert thread_flow["locations"]  # threadFlow requires locations (minItems 1)
                for step in thread_flow["locations"]:
                    validate_location(step["location"])
        for suppression in result.get("suppressions", []):
            assert suppression["kind"] in {"inSource", "external"}  # required
    return run


def check_with_outputs(run, trace, *extra):
    junit, sarif = run.dir / "out.xml", run.dir / "out.sarif"
    r = run.cli("check", trace, "--junit", junit, "--sarif", sarif, *extra)
    return r, junit, sarif


def test_leaky_run_gives_a_failing_testcase_and_an_error_result_at_the_leaking_line(run):
    assert run.program([SCENARIOS, "leak"]).returncode == 0
    [trace] = run.traces()
    r, junit, sarif = check_with_outputs(run, trace)
    assert r.returncode == 1, r.stderr
    line = site_line("planted leak")

    cases = validate_junit(junit)
    failing = [c for c in cases if c.find("failure") is not None]
    assert len(failing) == 1 and len(cases) == 1
    failure = failing[0].find("failure")
    assert failing[0].get("classname") == "gpumemshim.leak"
    assert failure.get("type") == "gpumemshim.leak"
    assert str(3 * MIB) in failure.get("message")
    assert f"cuda_scenarios.cpp:{line}" in failure.get("message")
    # The whole stack in the failure text: the leaking function and its caller main.
    assert "leak_three_buffers" in failure.text and " main " in failure.text, failure.text

    result_run = validate_sarif(sarif)
    [result] = result_run["results"]
    assert result["ruleId"] == "gpumemshim/leak" and result["level"] == "error"
    assert str(3 * MIB) in result["message"]["text"]
    physical = result["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"].endswith("/cuda_scenarios.cpp")
    assert physical["artifactLocation"]["uri"].startswith("file:///")
    assert physical["region"]["startLine"] == line
    steps = result["codeFlows"][0]["threadFlows"][0]["locations"]
    report = run.report(trace)
    assert len(steps) == len(report["leaks"][0]["stack"])
    assert any("main" == s["location"]["message"]["text"].split(" ")[0] for s in steps)


def test_clean_run_gives_one_passing_testcase_and_no_results(run):
    assert run.program([SCENARIOS, "clean"]).returncode == 0
    [trace] = run.traces()
    r, junit, sarif = check_with_outputs(run, trace)
    assert r.returncode == 0, r.stderr
    cases = validate_junit(junit)
    assert len(cases) == 1 and cases[0].find("failure") is None
    assert validate_sarif(sarif)["results"] == []


def test_leak_under_the_limit_or_suppressed_is_reported_without_failing(run):
    assert run.program([SCENARIOS, "leak"]).returncode == 0
    [trace] = run.traces()
    r, junit, sarif = check_with_outputs(run, trace, "--max-leak-bytes", 3 * MIB)
    assert r.returncode == 0, r.stderr
    cases = validate_junit(junit)
    # The finding is listed and passes, plus the passing summary case.
    assert len(cases) == 2 and all(c.find("failure") is None for c in cases)
    [result] = validate_sarif(sarif)["results"]
    assert result["level"] == "warning"

    supp = run.dir / "supp.txt"
    supp.write_text("leak:leak_three_buffers\n")
    r, junit, sarif = check_with_outputs(run, trace, "--suppressions", supp)
    assert r.returncode == 0, r.stderr
    assert all(c.find("failure") is None for c in validate_junit(junit))
    [result] = validate_sarif(sarif)["results"]
    assert result["level"] == "note"
    assert result["suppressions"][0]["kind"] == "external"


def test_failed_allocation_is_an_oom_result_at_its_line(run):
    assert run.program([SCENARIOS, "oom"], FAKECUDA_OOM_AFTER=16 * MIB).returncode == 4
    [trace] = run.traces()
    r, junit, sarif = check_with_outputs(run, trace)
    validate_junit(junit)
    results = validate_sarif(sarif)["results"]
    ooms = [x for x in results if x["ruleId"] == "gpumemshim/oom"]
    assert len(ooms) == 1, results
    assert ooms[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == site_line("oom")
    assert str(64 * MIB) in ooms[0]["message"]["text"]


@pytest.mark.parametrize("flag", ["--junit", "--sarif"])
def test_unwritable_output_is_a_one_line_error_with_exit_2(run, flag):
    assert run.program([SCENARIOS, "clean"]).returncode == 0
    [trace] = run.traces()
    target = run.dir / "no-such-dir" / "out"
    r = run.cli("check", trace, flag, target)
    assert r.returncode == 2
    assert r.stderr.startswith("gpumemshim: error:") and r.stderr.count("\n") == 1, r.stderr
    assert str(target) in r.stderr
    assert not os.path.exists(target)


FINDINGS_APP = BUILD / "tests" / "integration" / "findings_app"


def test_growth_is_a_result_at_its_line_and_fails_only_over_the_limit(run):
    assert run.program([FINDINGS_APP, "growth", 30]).returncode == 0
    [trace] = run.traces()
    line = site_line("step_leak", "findings_app.cpp")
    r, junit, sarif = check_with_outputs(run, trace, "--max-leak-bytes", 1 << 40,
                                         "--max-growth-bytes-per-step", 1024)
    assert r.returncode == 1, r.stderr
    [growth_case] = [c for c in validate_junit(junit) if c.get("classname") == "gpumemshim.growth"]
    failure = growth_case.find("failure")
    assert failure is not None and f"findings_app.cpp:{line}" in failure.get("message")
    [growth] = [x for x in validate_sarif(sarif)["results"] if x["ruleId"] == "gpumemshim/growth"]
    assert growth["level"] == "error"
    assert growth["locations"][0]["physicalLocation"]["region"]["startLine"] == line
    assert "per step" in growth["message"]["text"] and "Advice:" in growth["message"]["text"]
    # Under a generous limit the same growth is a passing testcase and a warning.
    r, junit, sarif = check_with_outputs(run, trace, "--max-leak-bytes", 1 << 40,
                                         "--max-growth-bytes-per-step", 1 << 20)
    assert r.returncode == 0, r.stderr
    assert all(c.find("failure") is None for c in validate_junit(junit))
    [growth] = [x for x in validate_sarif(sarif)["results"] if x["ruleId"] == "gpumemshim/growth"]
    assert growth["level"] == "warning"


def test_fragmentation_oom_is_a_result_with_the_expandable_segments_advice(run):
    assert run.program([FINDINGS_APP, "frag"]).returncode == 0
    [trace] = run.traces()
    r, junit, sarif = check_with_outputs(run, trace)
    validate_junit(junit)
    frag = [x for x in validate_sarif(sarif)["results"] if x["ruleId"] == "gpumemshim/fragmentation"]
    assert len(frag) == 1, frag
    assert "expandable_segments" in frag[0]["message"]["text"], frag[0]["message"]["text"]
