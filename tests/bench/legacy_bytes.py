# Bytes per placement delivered to a legacy board session (no ack) polled with
# `Connection: close` (Python's urllib) and to one polled over a kept-alive connection
# (http.client), through the same gateway, for the same placements: 12 rounds of "place
# 1-30 tiles in SQL, poll, poll again at once". Prints events, seqs delivered again and
# bytes (bodies and headers). By hand, against a running gateway:
#   python3 tests/bench/legacy_bytes.py http://127.0.0.1:8080 postgresql://.../pgplace BOARD USER
# (psql on PATH; the board 100x100 or larger, without a cooldown for USER).
import sys, json, subprocess, urllib.request, http.client, urllib.parse
gw, pg, board, user = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rpc_close(method, params):
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).encode()
    r = urllib.request.urlopen(urllib.request.Request(gw + "/jsonrpc", data=body, headers={"Content-Type": "application/json"}), timeout=30)
    raw = r.read(); return json.loads(raw), len(raw) + sum(len(k) + len(v) + 4 for k, v in r.getheaders()) + 17
u = urllib.parse.urlsplit(gw); keep = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
def rpc_keep(method, params):
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
    keep.request("POST", "/jsonrpc", body, {"Content-Type": "application/json"})
    r = keep.getresponse(); raw = r.read()
    return json.loads(raw), len(raw) + sum(len(k) + len(v) + 4 for k, v in r.getheaders()) + 17
def place(n, r):
    subprocess.run(["psql", "-X", "-q", pg, "-c", f"SELECT count(*) FROM place.place_many({board}, array_fill({user}::bigint, ARRAY[{n}]), ARRAY(SELECT g % 100 FROM generate_series(1,{n}) g), ARRAY(SELECT (g / 100 + {r}) % 100 FROM generate_series(1,{n}) g), ARRAY(SELECT 1 + (g+{r}) % 15 FROM generate_series(1,{n}) g))"], check=True, stdout=subprocess.DEVNULL)
clients = {"Connection: close (urllib)": rpc_close, "keep-alive (http.client)": rpc_keep}
sessions = {}
for name, call in clients.items():
    s = call("session.create", [])[0]["result"]; call("session.subscribe", [s, "board", {"board": board}])
    sessions[name] = s
stats = {name: {"events": 0, "seqs": set(), "again": 0, "body": 0} for name in clients}
placed = 0
for r in range(12):
    n = 1 + (r * 7) % 30; place(n, r); placed += n
    for name, call in clients.items():
      # A client that polls again as soon as it has read an answer.
      for timeout in (2, 0.2):
        answer, nbytes = call("session.get_events", [sessions[name], timeout])
        st = stats[name]; st["body"] += nbytes
        for e in answer["result"]:
          if e.get("action") == "update" and isinstance(e["obj"].get("x"), int):
            st["events"] += 1
            if e["obj"]["seq"] in st["seqs"]: st["again"] += 1
            st["seqs"].add(e["obj"]["seq"])
print(f"placed {placed} in 12 rounds")
for name, st in stats.items():
    print(f"{name:28} events {st['events']:5}  delivered again {st['again']:5}  bytes {st['body']:7}  bytes/placement {st['body']/placed:6.1f}")
