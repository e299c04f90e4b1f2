"""`make simulate`: start every pod of an overlay on this machine as the controllers would create them, with the
command, arguments and env written in the manifests, each pod under its own hostname and address, and report
whether the torchrun world formed and trained. Uses the launcher model the policies read (policies/launchers/).

Names resolve through libnss_wrapper. Where libsocket_wrapper is installed each pod also gets a network of its own:
its sockets are Unix sockets named after its address, so a server listening on 0.0.0.0 in one pod answers only at
that pod's address, as in a cluster. Without it every pod shares one loopback network: the world's own, in a network
namespace of its own where the machine allows one (sandbox.py, confine.py), else this machine's."""

# The package, by what a reader looks for: host.py (what this machine gives: nss_wrapper, socket_wrapper, the world's
# network namespace, the relay), pods.py (the pods laid out: addresses, DNS, volumes, command and env), processes.py
# (starting and stopping them), sandbox.py and confine.py (what confines a pod), diagnose.py (what of their output
# reaches the terminal), simulation.py (one run), faults.py and fault_run.py (`FAULT=`: what a fault is, and injecting
# it while the controllers do what they decide), scale_down.py (SCALE_TO=), result.py (the summary and the run
# folder), ask_trainer.py (what the trainer says of itself, in a process of its own: the validation layer never
# imports it), cli.py (the command line; `python -m policies.simulate` runs its main).
