// The pipeline's MongoDB users besides root: the mongo image's entrypoint runs this file once,
// on an empty data directory, as root. The passwords are compose secrets (scripts/compose-secrets).
//   pipeline  readWrite on MONGO_DB: the writer's and reconcile's MONGO_URL
//   exporter  clusterMonitor (and read on `local`): what mongodb-exporter reads
const fs = require("fs");
const secret = (name) => fs.readFileSync(`/run/secrets/${name}`, "utf8").trim();
const admin = db.getSiblingDB("admin");
admin.createUser({
  user: "pipeline",
  pwd: secret("mongo-pipeline.pass"),
  roles: [{ role: "readWrite", db: process.env.MONGO_DB || "pipeline" }],
});
admin.createUser({
  user: "exporter",
  pwd: secret("mongo-exporter.pass"),
  roles: [{ role: "clusterMonitor", db: "admin" }, { role: "read", db: "local" }],
});
