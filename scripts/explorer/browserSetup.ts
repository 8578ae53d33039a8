// Setup for browser.sh (run by fixtures.mjs through Vite's module runner, copied to
// <explorer>/http-client/seedd/): globalSetup.ts as run.sh runs it (fixtures, palm stopped,
// seedd serving palm's storage), then seedd joins the fixture nodes' gossip as a seed does on the
// network, so that it learns their aliases from node announcements:
//   - seedd dials palm (seedd-browser adds `[p2p] connect = ["<palm>@$SEEDD_BROWSER_PALM_P2P"]`,
//     with backoff) and palm's radicle-node is started again listening there;
//   - alice's, bob's and eve's radicle-nodes are (re)started with `node.connect` set to seedd
//     (seedd-browser makes it listen on $SEEDD_BROWSER_P2P): palm does not relay the others'
//     node announcements (relay "auto" without external addresses), and a radicle-node sends its
//     own to every peer it connects to.
// eve's node is still running from the cobs fixture (the explorer's fixtures never stop it): the
// peers the fixtures create are recorded (RadiclePeer.create is wrapped) so that it can be
// stopped and started again connected to seedd. With SEEDD_CONTRACT_REUSE_FIXTURES=1 the
// fixtures make only palm: alice, bob and eve are created again on their existing profiles.
import * as Fs from "node:fs";
import * as Path from "node:path";
import waitOn from "wait-on";
import { RadiclePeer } from "@tests/support/peerManager.js";
import { gitOptions } from "@tests/support/fixtures.js";
import { tmpDir } from "@tests/support/support.js";
import config from "@tests/support/config.js";
import globalSetup from "./globalSetup.js";

const created = new Map<string, RadiclePeer>();
const realCreate = RadiclePeer.create.bind(RadiclePeer);
RadiclePeer.create = async (params: Parameters<typeof RadiclePeer.create>[0]) => {
  const peer = await realCreate(params);
  created.set(params.name, peer);
  return peer;
};

// The order the fixtures create them in (their RAD_KEYGEN_SEED is that position, repeated).
const others = ["alice", "bob", "eve"] as const;
const keygenSeed = { palm: "1", alice: "2", bob: "3", eve: "4" };

function log(line: string) {
  console.log(`  ${line}`);
}

export default async function browserSetup(): Promise<() => Promise<void>> {
  const teardown = await globalSetup();
  const ours: RadiclePeer[] = [];
  const stopAll = async () => {
    await Promise.all(ours.map(p => p.shutdown()));
    await teardown();
  };
  if (process.env.SEEDD_BROWSER_GOSSIP === "0") {
    log("gossip: off (SEEDD_BROWSER_GOSSIP=0), seedd hears no node announcement");
    return stopAll;
  }
  try {
    await joinGossip(ours);
  } catch (e) {
    await stopAll();
    throw e;
  }
  return stopAll;
}

async function joinGossip(ours: RadiclePeer[]) {
  const seeddP2p = process.env.SEEDD_BROWSER_P2P || "127.0.0.1:8776";
  const palmP2p = process.env.SEEDD_BROWSER_PALM_P2P || "127.0.0.1:8777";
  const base = `http://127.0.0.1:${config.nodes.defaultHttpdPort}`;
  const seedd = (await (await fetch(`${base}/api/v1/node`)).json()) as { id: string };
  const outputLog = Fs.createWriteStream(Path.resolve(tmpDir, "browserGossip.log"), {
    flags: "a",
  });

  // palm: the seed's storage, dialled by seedd.
  const palm = created.get("palm");
  if (!palm) throw new Error("globalSetup created no palm peer");
  const [palmHost, palmPort] = palmP2p.split(":");
  void palm.spawn("radicle-node", ["--listen", `0.0.0.0:${palmPort}`]);
  await waitOn({ resources: [`tcp:${palmHost}:${palmPort}`], timeout: 10_000 });
  void palm.rad(["node", "events"]);
  log(`gossip: palm ${palm.nodeId} listens on ${palmP2p}; seedd ${seedd.id} dials it`);

  // alice, bob, eve: their nodes connect to seedd.
  for (const name of others) {
    let peer = created.get(name);
    if (peer) {
      // eve's node still runs from the cobs fixture; alice's and bob's were stopped.
      await peer.stopNode();
    } else {
      peer = await RadiclePeer.create({
        dataPath: Path.resolve(tmpDir, "peers"),
        name,
        gitOptions: gitOptions[name],
        radSeed: keygenSeed[name].repeat(64),
        outputLog,
      });
      ours.push(peer);
    }
    await peer.startNode({
      node: { connect: [`${seedd.id}@${seeddP2p}`] },
    } as Parameters<RadiclePeer["startNode"]>[0]);
    log(`gossip: ${name} ${peer.nodeId} connects to seedd at ${seeddP2p}`);
  }
}
