//! A legacy board session (no `ack`) polled by clients the suite did not write gets each
//! seq exactly once, in order, whatever its HTTP stack does with the connection: curl
//! one-shot (no `Connection` header, closes after the answer), Python's `urllib` (sends
//! `Connection: close`), Python's `http.client` (keep-alive asked, closed by the client),
//! Java's `HttpURLConnection` (its keep-alive pool, and with `http.keepAlive=false`
//! `Connection: close`), a raw HTTP/1.0 socket, and curl behind nginx with Debian's default
//! `proxy_pass` (HTTP/1.0 to the upstream, a new upstream connection per request) — on one
//! gateway, and moving between two gateways on every poll. Each of these clients opens a new connection for its
//! next poll as soon as it has read an answer; before 0.8.6 the earlier connection, closed
//! on both sides by then, looked reset, and every answer came again.
//! A visitor's first steps (a guest, a tile through each of two gateways, the session
//! ended) go through each of them too, and again with one placer per board (`--placer-url`:
//! the gateway without the board's lease sends the tile on to the one that holds it).

use pgplace_tests::curl::post_jsonrpc;
use pgplace_tests::gateway::{http10_post, start_gateway, start_placer, Http, FORWARDED_METRIC};
use pgplace_tests::processes::Nginx;
use pgplace_tests::{connect, create_board, create_users, fresh_database};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const ROUNDS: usize = 10;

#[derive(Clone, Copy, Debug)]
enum Stack {
    CurlOneShot,
    PythonUrllib,
    PythonHttpClient,
    JavaKeepAlive,
    JavaClose,
    RawHttp10,
}

const EVERY_STACK: [Stack; 6] = [
    Stack::CurlOneShot,
    Stack::PythonUrllib,
    Stack::PythonHttpClient,
    Stack::JavaKeepAlive,
    Stack::JavaClose,
    Stack::RawHttp10,
];

/// The placements of one client's rounds, and the seqs it was given.
struct Run {
    placed: Vec<i64>,
    delivered: Vec<i64>,
}

fn rpc(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).to_string()
}

/// A client program (Python, Java) that stays up and makes each request it is given (one line,
/// `[url, body]`) with its HTTP library, answering with the body on one line: a real
/// client's loop, polling again as soon as it has read an answer.
struct LineClient {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// Requests go as `url<TAB>body` (Java) rather than a JSON pair (Python).
    tab_separated: bool,
}

/// `urllib.request` (sends `Connection: close`).
const URLLIB: &str = "import sys, json, urllib.request as u
for line in sys.stdin:
    url, body = json.loads(line)
    r = u.urlopen(u.Request(url, data=body.encode(), headers={'Content-Type': 'application/json'}), timeout=30)
    print(r.read().decode().replace('\\n', ' '), flush=True)
";

/// `http.client`, a new connection per request, closed by the client once it has read the
/// answer (keep-alive asked for, never used).
const HTTP_CLIENT: &str = "import sys, json, http.client, urllib.parse as p
for line in sys.stdin:
    url, body = json.loads(line)
    s = p.urlsplit(url)
    c = http.client.HTTPConnection(s.hostname, s.port, timeout=30)
    c.request('POST', s.path, body, {'Content-Type': 'application/json'})
    print(c.getresponse().read().decode().replace('\\n', ' '), flush=True)
    c.close()
";

/// Java's `HttpURLConnection`, as a program that keeps running: each request on one line
/// (`url<TAB>body`), each answer on one line. By default the JDK keeps connections alive
/// in its pool and reuses them; with `-Dhttp.keepAlive=false` it sends `Connection: close`.
const JAVA: &str = "import java.io.*; import java.net.*; import java.nio.charset.StandardCharsets;
public class Poll {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            int tab = line.indexOf('\\t');
            HttpURLConnection c = (HttpURLConnection) URI.create(line.substring(0, tab)).toURL().openConnection();
            c.setRequestMethod(\"POST\");
            c.setDoOutput(true);
            c.setConnectTimeout(30000);
            c.setReadTimeout(30000);
            c.setRequestProperty(\"Content-Type\", \"application/json\");
            try (OutputStream out = c.getOutputStream()) {
                out.write(line.substring(tab + 1).getBytes(StandardCharsets.UTF_8));
            }
            try (InputStream answer = c.getInputStream()) {
                String text = new String(answer.readAllBytes(), StandardCharsets.UTF_8);
                System.out.println(text.replace('\\n', ' '));
                System.out.flush();
            }
        }
    }
}
";

impl LineClient {
    fn start(script: &str) -> LineClient {
        Self::spawn(tokio::process::Command::new("python3").args(["-u", "-c", script]))
    }

    /// `JAVA` run from its source (the JDK's source launcher), `keep_alive` or not.
    fn java(keep_alive: bool) -> LineClient {
        let dir = std::env::temp_dir().join(format!("pgplace-java-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("Poll.java");
        std::fs::write(&source, JAVA).unwrap();
        let mut java = LineClient::spawn(
            tokio::process::Command::new("java")
                .arg(format!("-Dhttp.keepAlive={keep_alive}"))
                .arg(&source),
        );
        java.tab_separated = true;
        java
    }

    fn spawn(command: &mut tokio::process::Command) -> LineClient {
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the client program runs (python3, java)");
        let stdout = child.stdout.take().unwrap();
        LineClient {
            child,
            lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout)),
            tab_separated: false,
        }
    }

    async fn post(&mut self, url: &str, body: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        let line = if self.tab_separated {
            format!("{url}\t{body}\n")
        } else {
            json!([url, body]).to_string() + "\n"
        };
        stdin.write_all(line.as_bytes()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(40), self.lines.next_line())
            .await
            .expect("python answers")
            .unwrap()
            .expect("python is still running")
    }
}

/// A client of kind `stack` (the Python and Java ones keep their process between calls).
enum Client {
    Curl,
    Program(LineClient),
    Http10,
}

impl Client {
    fn of(stack: Stack) -> Client {
        match stack {
            Stack::CurlOneShot => Client::Curl,
            Stack::PythonUrllib => Client::Program(LineClient::start(URLLIB)),
            Stack::PythonHttpClient => Client::Program(LineClient::start(HTTP_CLIENT)),
            Stack::JavaKeepAlive => Client::Program(LineClient::java(true)),
            Stack::JavaClose => Client::Program(LineClient::java(false)),
            Stack::RawHttp10 => Client::Http10,
        }
    }

    /// One JSON-RPC call to `addr`: its `result`.
    async fn call(&mut self, addr: SocketAddr, body: &str) -> Value {
        let url = format!("http://{addr}/jsonrpc");
        let text = match self {
            Client::Curl => post_jsonrpc(addr, body).await,
            Client::Program(program) => program.post(&url, body).await,
            Client::Http10 => http10_post(addr, body).await.unwrap(),
        };
        let reply: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        reply
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("an error: {reply}"))
    }
}

/// The placements' seqs among `events` (a session arriving at another gateway also gets
/// the board's settings first, which carry the board's seq); a reset is a failure here:
/// continuity holds for every one of these clients.
fn seqs(events: &Value) -> Vec<i64> {
    let events = events.as_array().expect("events");
    assert!(
        events.iter().all(|e| e["action"] != "reset"),
        "no reset: {events:?}"
    );
    events
        .iter()
        .filter(|e| e["action"] == "update" && e["obj"]["x"].is_i64())
        .filter_map(|e| e["obj"]["seq"].as_i64())
        .collect()
}

/// A board session driven by `stack` through `addrs` (one poll each, in turn): rounds of
/// "place 1-20 tiles in SQL, poll", then polls until nothing more comes.
async fn drive(stack: Stack, addrs: &[SocketAddr], url: &str, name: &str) -> Run {
    let sql = connect(url).await;
    let board = create_board(&sql, name, (32, 32), 4, "0").await;
    let user = create_users(&sql, name, 1).await[0];
    let mut client = Client::of(stack);
    let session = client
        .call(addrs[0], &rpc("session.create", json!([])))
        .await;
    client
        .call(
            addrs[0],
            &rpc(
                "session.subscribe",
                json!([session, "board", {"board": board}]),
            ),
        )
        .await;
    let mut placed = Vec::new();
    let mut delivered = Vec::new();
    let mut turn = 0;
    let mut poll = async |timeout: f64| {
        let addr = addrs[turn % addrs.len()];
        turn += 1;
        seqs(
            &client
                .call(addr, &rpc("session.get_events", json!([session, timeout])))
                .await,
        )
    };
    for round in 0..ROUNDS {
        let count = 1 + (round as i32 * 7) % 20;
        let rows = sql
            .query(
                "SELECT seq FROM place.place_many($1, array_fill($2::bigint, ARRAY[$3::int]),
                     ARRAY(SELECT g % 32 FROM generate_series(1, $3) g),
                     ARRAY(SELECT g / 32 % 32 FROM generate_series(1, $3) g),
                     ARRAY(SELECT 1 + (g + $4) % 15 FROM generate_series(1, $3) g))",
                &[&board, &user, &count, &(round as i32)],
            )
            .await
            .unwrap();
        placed.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
        delivered.extend(poll(2.0).await);
    }
    // Until everything placed has come, and one more poll brings nothing.
    for _ in 0..20 {
        let more = poll(0.5).await;
        let done = more.is_empty() && delivered.len() >= placed.len();
        delivered.extend(more);
        if done {
            break;
        }
    }
    Run { placed, delivered }
}

fn check(stack: &str, run: &Run) {
    assert!(!run.placed.is_empty());
    assert_eq!(
        run.delivered, run.placed,
        "{stack}: each placement's seq once, in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_seq_once_for_every_http_stack() {
    let url = fresh_database("gw_http_stacks").await;
    let gw = start_gateway(&url, |_| {}).await;
    let other = start_gateway(&url, |_| {}).await;
    Http::new(gw.addr).ok("board.list", json!([])).await;
    for (i, stack) in EVERY_STACK.into_iter().enumerate() {
        let one = drive(stack, &[gw.addr], &url, &format!("one {i}")).await;
        check(&format!("{stack:?}, one gateway"), &one);
        let two = drive(stack, &[gw.addr, other.addr], &url, &format!("two {i}")).await;
        check(&format!("{stack:?}, alternating two gateways"), &two);
    }
}

/// nginx as Debian configures `proxy_pass` by default (HTTP/1.0 to the upstream and a new
/// upstream connection per request), and as docker/nginx-gateways.conf does: every
/// answer's TCP acknowledgements are nginx's.
/// The client here reads every answer, so it gets each seq once; what a client that loses
/// an answer behind such a proxy gets is in gateway/README.md ("Behind a proxy").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_seq_once_behind_nginx() {
    let url = fresh_database("gw_http_stacks_nginx").await;
    let gw = start_gateway(&url, |_| {}).await;
    let other = start_gateway(&url, |_| {}).await;
    let dir = std::env::temp_dir().join(format!("pgplace-http-stacks-{}", std::process::id()));
    let defaults = |upstreams: &[SocketAddr]| {
        let servers: String = upstreams.iter().map(|u| format!("server {u}; ")).collect();
        format!(
            "    upstream gateways {{ {servers} }}
    server {{ listen {{addr}}; location / {{ proxy_pass http://gateways; }} }}
"
        )
    };
    let one = Nginx::start_with(&dir, "nginx-one", &defaults(&[gw.addr]), "", 64);
    let two = Nginx::start_with(&dir, "nginx-two", &defaults(&[gw.addr, other.addr]), "", 64);
    one.wait_ready().await;
    two.wait_ready().await;
    let run = drive(Stack::CurlOneShot, &[one.addr], &url, "nginx one").await;
    check("curl behind nginx (defaults), one gateway", &run);
    let run = drive(Stack::PythonUrllib, &[two.addr], &url, "nginx two").await;
    check(
        "urllib behind nginx (defaults), round-robin over two gateways",
        &run,
    );
    // The shipped configuration's pattern (docker/nginx-gateways.conf: HTTP/1.1 and
    // keep-alive to the gateways, no buffering), written by the suite's Nginx::start.
    let shipped = Nginx::start(&[gw.addr, other.addr], &dir, 64);
    shipped.wait_ready().await;
    let run = drive(Stack::PythonUrllib, &[shipped.addr], &url, "nginx shipped").await;
    check(
        "urllib behind nginx (docker/nginx-gateways.conf), two gateways",
        &run,
    );
    let run = drive(Stack::RawHttp10, &[shipped.addr], &url, "nginx shipped 1.0").await;
    check(
        "HTTP/1.0 behind nginx (docker/nginx-gateways.conf), two gateways",
        &run,
    );
}

/// A visitor's first steps — a session, a guest, a tile, the session ended (what the page's
/// pagehide sends) — through each of these clients, every call alternating two gateways
/// (the guest made on one places through the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_plays_through_every_http_stack() {
    a_guest_plays("gw_http_stacks_guests", false).await;
}

/// The same with one placer per board (`--placer-url` on both gateways): the gateway that
/// does not hold the board's lease sends its placements to the one that does, and each
/// client still gets its own placement's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_plays_through_every_http_stack_with_one_placer() {
    a_guest_plays("gw_http_stacks_placer", true).await;
}

/// A gateway that lets guests play, as a placer to the others when `placer`.
async fn guest_gateway(url: &str, placer: bool) -> pgplace_gateway::Running {
    let guests = |c: &mut pgplace_gateway::Config| {
        c.guest_boards = "*".into();
        c.guests_per_address_per_hour = 100;
    };
    if placer {
        start_placer(url, guests).await
    } else {
        start_gateway(url, guests).await
    }
}

async fn a_guest_plays(database: &str, placers: bool) {
    let url = fresh_database(database).await;
    let sql = connect(&url).await;
    let board = create_board(&sql, "guests welcome", (16, 16), 4, "0").await;
    let gw = guest_gateway(&url, placers).await;
    let other = guest_gateway(&url, placers).await;
    let forwarded_before = Http::new(other.addr)
        .metric(FORWARDED_METRIC)
        .await
        .unwrap_or(0.0);
    for (x, stack) in EVERY_STACK.into_iter().enumerate() {
        let mut client = Client::of(stack);
        let session = client
            .call(gw.addr, &rpc("session.create", json!([])))
            .await;
        let guest = client
            .call(
                other.addr,
                &rpc("session.play_as_guest", json!([session, board])),
            )
            .await;
        let name = guest["name"].as_str().unwrap_or_default().to_string();
        assert!(name.starts_with("guest-"), "{stack:?}: {guest}");
        // Through each gateway: with one placer, the one without the lease forwards.
        for (y, through) in [gw.addr, other.addr].into_iter().enumerate() {
            let placed = client
                .call(
                    through,
                    &rpc("board.place", json!([session, board, x, y, 3])),
                )
                .await;
            let seq = placed["seq"].as_i64().expect("a seq");
            let by: String = sql
                .query_one(
                    "SELECT u.name FROM place.placements p JOIN place.users u ON u.id = p.user_id \
                     WHERE p.board_id = $1 AND p.seq = $2 AND p.x = $3 AND p.y = $4",
                    &[&board, &seq, &(x as i32), &(y as i32)],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(by, name, "{stack:?}: the guest placed seq {seq}");
        }
        client
            .call(other.addr, &rpc("session.destroy", json!([session])))
            .await;
        let gone: bool = sql
            .query_one(
                "SELECT NOT EXISTS (SELECT FROM place.sessions WHERE id_hash = place._session_hash($1))",
                &[&session.as_str().unwrap()],
            )
            .await
            .unwrap()
            .get(0);
        assert!(gone, "{stack:?}: the session ended");
    }
    if placers {
        let forwarded = Http::new(other.addr)
            .metric(FORWARDED_METRIC)
            .await
            .unwrap_or(0.0)
            - forwarded_before;
        assert!(forwarded > 0.0, "the gateway without the lease forwarded");
    }
}
