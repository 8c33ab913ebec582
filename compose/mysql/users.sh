# shellcheck shell=bash
# The pipeline's MariaDB users besides root and the schema owner (`pipeline`, MARIADB_USER): the
# mariadb image's entrypoint sources this file once, on an empty data directory, with its
# docker_process_sql at hand. The passwords are compose secrets (scripts/compose-secrets).
#   pipeline_writer  SELECT, INSERT, UPDATE on the pipeline's database: the writer's MYSQL_URL
#   exporter         what mysqld-exporter reads (PROCESS, REPLICATION CLIENT, SELECT), 3 connections
docker_process_sql <<SQL
CREATE USER 'pipeline_writer'@'%' IDENTIFIED BY '$(cat /run/secrets/mysql-writer.pass)';
GRANT SELECT, INSERT, UPDATE ON \`pipeline\`.* TO 'pipeline_writer'@'%';
CREATE USER 'exporter'@'%' IDENTIFIED BY '$(cat /run/secrets/mysql-exporter.pass)' WITH MAX_USER_CONNECTIONS 3;
GRANT PROCESS, REPLICATION CLIENT, SELECT ON *.* TO 'exporter'@'%';
SQL
