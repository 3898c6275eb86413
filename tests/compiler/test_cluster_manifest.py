"""``flowc cluster manifest --format tfjob``: a Kubeflow TFJob checked against the TFJob schema
of the training operator's own Python SDK (``kubeflow-training``: its generated models reject
a missing required field, and a field they do not know is lost on the way through them, so a
round trip that changes nothing means every field is one of the schema's). Skipped where the
SDK is not installed (it is in the ``test`` extra)."""
import json
import os
import subprocess
import sys

import pytest

from cluster_fixture import ROOT
from compiler.cli.manifest import tfjob_manifest, to_yaml
from runtime.cluster import ClusterSpecError, parse_tf_config

yaml = pytest.importorskip("yaml")


def _manifest(*args, spec=()):
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "cluster", "manifest", *spec,
                        "--format", "tfjob", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _through_the_sdk(manifest: dict):
    """The manifest read into the SDK's KubeflowOrgV1TFJob and written back."""
    training = pytest.importorskip("kubeflow.training")

    class Response:
        data = json.dumps(manifest)

    api = training.ApiClient()
    job = api.deserialize(Response(), "KubeflowOrgV1TFJob")
    assert isinstance(job, training.KubeflowOrgV1TFJob)
    return api.sanitize_for_serialization(job)


def test_the_tfjob_matches_the_operators_schema():
    training = pytest.importorskip("kubeflow.training")
    from kubeflow.training.constants import constants
    text = _manifest("--jobs", "chief=1,ps=2,worker=3", "--image", "registry.example/flowc:1",
                     "--name", "mnist", "--client", "python3 train.py --steps 1000")
    manifest = yaml.safe_load(text)
    assert _through_the_sdk(manifest) == manifest
    assert manifest["apiVersion"] == constants.API_VERSION
    assert manifest["kind"] == constants.TFJOB_KIND
    specs = manifest["spec"]["tfReplicaSpecs"]
    assert set(specs) == {constants.REPLICA_TYPE_CHIEF, constants.REPLICA_TYPE_PS,
                          constants.REPLICA_TYPE_WORKER}
    assert [specs[t]["replicas"] for t in ("Chief", "PS", "Worker")] == [1, 2, 3]
    for kind, spec in specs.items():
        (container,) = spec["template"]["spec"]["containers"]
        # what the operator looks for to write each replica's TF_CONFIG
        assert container["name"] == constants.TFJOB_CONTAINER
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
        assert container["image"] == "registry.example/flowc:1"
        command = " ".join(container["command"])
        assert "flowc serve --bind 0.0.0.0" in command
        token = [e for e in container["env"] if e["name"] == "FLOWC_TOKEN"]
        assert token == [{"name": "FLOWC_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "flowc-token", "key": "token"}}}]
        assert ("python3 train.py --steps 1000" in command) == (kind == "Chief")
    del training


def test_a_field_outside_the_schema_or_a_missing_one_is_caught():
    manifest = tfjob_manifest({"ps": 1, "worker": 1}, "j", "img")
    bad = json.loads(json.dumps(manifest))
    bad["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["portz"] = []
    assert _through_the_sdk(bad) != bad
    bad = json.loads(json.dumps(manifest))
    del bad["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError, match="name"):
        _through_the_sdk(bad)


def test_every_replica_resolves_its_task_from_the_operators_tf_config():
    """The TF_CONFIG the operator gives each replica (job names lower-case, one address per
    replica's service) is what ``flowc serve`` reads: each replica is its own task."""
    manifest = tfjob_manifest({"chief": 1, "ps": 1, "worker": 2}, "mnist", "img")
    jobs = {kind.lower(): spec["replicas"]
            for kind, spec in manifest["spec"]["tfReplicaSpecs"].items()}
    cluster = {job: [f"mnist-{job}-{k}.default.svc:2222" for k in range(n)]
               for job, n in jobs.items()}
    for job, n in jobs.items():
        for k in range(n):
            spec, got_job, got_task = parse_tf_config(json.dumps(
                {"cluster": cluster, "task": {"type": job, "index": k}, "environment": "cloud"}))
            assert (got_job, got_task) == (job, k)
            assert spec.address(job, k) == f"mnist-{job}-{k}.default.svc:2222"


def test_yaml_output_reads_back_and_bad_jobs_are_refused():
    manifest = tfjob_manifest({"worker": 2}, "w", "img", client="sh -c 'echo \"hi\"'",
                              namespace="ml")
    assert yaml.safe_load(to_yaml(manifest)) == manifest
    with pytest.raises(ClusterSpecError, match="no replica type"):
        tfjob_manifest({"trainer": 1}, "j", "img")
    with pytest.raises(ClusterSpecError, match="at most one chief"):
        tfjob_manifest({"chief": 2}, "j", "img")


def test_manifest_from_a_cluster_spec_file_and_to_a_file(tmp_path):
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"ps": ["a:1", "b:1"], "worker": ["c:1"]}))
    out = tmp_path / "job.yaml"
    _manifest("-o", str(out), spec=[str(spec)])
    replicas = {k: v["replicas"] for k, v in
                yaml.safe_load(out.read_text())["spec"]["tfReplicaSpecs"].items()}
    assert replicas == {"PS": 2, "Worker": 1}
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "cluster", "manifest"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--format" in r.stderr


def test_the_dockerfile_runs_a_task_with_a_compiler():
    """No container runtime here: the Dockerfile installs this package and a C compiler (the
    task builds partitions) and starts ``flowc serve`` on the operator's port."""
    with open(os.path.join(ROOT, "examples", "cluster", "Dockerfile")) as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    text = "\n".join(lines)
    assert lines[0].startswith("FROM python:3")
    assert "gcc" in text and "pip install" in text
    for folder in ("compiler", "runtime", "dsl", "codegen_templates"):
        assert f"COPY {folder} ./{folder}" in text
    assert "EXPOSE 2222" in lines
    assert lines[-1] == 'CMD ["flowc", "serve", "--bind", "0.0.0.0"]'
    assert "USER flowc" in lines
