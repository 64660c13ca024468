#!/usr/bin/python3
"""kube_overlay.py — deploy/kubernetes's manifests made playable by `podman kube play` (4.3) on
this machine, for tests/deploy/test_kube_play.sh. Prints one YAML stream; says on stderr each
thing it changed. What podman 4.3 does not play, and what stands in for it:

  Deployment replicas: 2   podman makes one pod of a Deployment: two Deployments of one replica
                           (idem-coordinator-0, -1), otherwise the manifest's pod template
  Service, PDB             not kinds podman plays: left out (the test talks to each pod's address)
  pod network              hostNetwork (each pod on a loopback port of its own, IDEM_LISTEN and
                           IDEM_ADVERTISE), the test's etcd and PostgreSQL on loopback
  image                    the image the test loaded (localhost/idem-coordinator:TAG)
  configMap, secret volumes  hostPath directories holding the same files (podman 4.3 plays only
                           hostPath, emptyDir and persistentVolumeClaim volumes)
  secretKeyRef IDEM_PG     the value (the test's database)
  grpc probes              podman 4.3 has no grpc probe (and runs no readiness or startup probe):
                           left out; the test asks grpc.health.v1 itself, as the kubelet would
  container ports          left out: podman refuses port mappings on the host network
  pod securityContext      runAsUser/runAsGroup copied to the container (podman reads them there)

Usage: kube_overlay.py MANIFEST_DIR IMAGE ETCD_URL PG_URL FILES_DIR PORT0 PORT1
"""
import copy
import os
import sys

import yaml


def note(msg):
    print("overlay: " + msg, file=sys.stderr)


def main():
    mdir, image, etcd, pg, files, port0, port1 = sys.argv[1:8]
    docs = {}
    for f in ("configmap.yaml", "secret.example.yaml", "deployment.yaml", "service.yaml", "pdb.yaml"):
        for d in yaml.safe_load_all(open(os.path.join(mdir, f))):
            docs[d["kind"]] = d
    for kind in ("Service", "PodDisruptionBudget"):
        note(f"{kind} left out (not a kind podman 4.3 plays)")
    # the ConfigMap's and the Secret's files, for the hostPath volumes
    ini = docs["ConfigMap"]["data"]["idem.ini"].replace("etcd = http://etcd:2379", f"etcd = {etcd}")
    ini = ini.replace("election-ttl = 5", "election-ttl = 2")
    os.makedirs(f"{files}/config", exist_ok=True)
    os.makedirs(f"{files}/secret", exist_ok=True)
    with open(f"{files}/config/idem.ini", "w") as fh:
        fh.write(ini)
    with open(f"{files}/secret/tokens", "w") as fh:
        fh.write(os.environ.get("IDEM_OVERLAY_TOKENS", docs["Secret"]["stringData"]["tokens"]))
    note(f"ConfigMap idem-config and Secret idem-secrets as files in {files} (etcd {etcd}, election-ttl 2)")
    out = []
    dep = docs["Deployment"]
    assert dep["spec"]["replicas"] >= 2, "the Deployment runs fewer than two coordinators"
    for i, port in enumerate((port0, port1)):
        d = copy.deepcopy(dep)
        d["metadata"]["name"] = f"idem-coordinator-{i}"
        d["spec"]["replicas"] = 1
        spec = d["spec"]["template"]["spec"]
        spec["hostNetwork"] = True
        psc = spec.get("securityContext", {})
        (c,) = spec["containers"]
        c["image"] = image
        if c.pop("ports", None) is not None and i == 0:
            note("container ports left out (podman maps no ports on the host network)")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if c.pop(probe, None) is not None and i == 0:
                note(f"{probe} (grpc) left out: podman 4.3 has none; the test asks grpc.health.v1")
        env = []
        for e in c["env"]:
            if e["name"] == "POD_IP":
                continue
            if e["name"] in ("IDEM_LISTEN", "IDEM_ADVERTISE"):
                e = {"name": e["name"], "value": f"127.0.0.1:{port}"}
            elif e["name"] == "IDEM_PG":
                e = {"name": "IDEM_PG", "value": pg}
            elif e["name"] == "IDEM_NODE_ID":
                e = {"name": "IDEM_NODE_ID", "value": f"idem-coordinator-{i}"}
            env.append(e)
        c["env"] = env
        sc = c.setdefault("securityContext", {})
        for k in ("runAsUser", "runAsGroup"):
            if k in psc:
                sc[k] = psc[k]
        vols = []
        for v in spec["volumes"]:
            if "configMap" in v:
                v = {"name": v["name"], "hostPath": {"path": f"{files}/config", "type": "Directory"}}
            elif "secret" in v:
                v = {"name": v["name"], "hostPath": {"path": f"{files}/secret", "type": "Directory"}}
            elif "emptyDir" in v:
                v = {"name": v["name"], "emptyDir": {}}
            vols.append(v)
        spec["volumes"] = vols
        out.append(d)
    note(f"Deployment idem-coordinator ({dep['spec']['replicas']} replicas) as two of one replica, "
         f"hostNetwork on 127.0.0.1:{port0} and :{port1}, image {image}, IDEM_PG the test's")
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
