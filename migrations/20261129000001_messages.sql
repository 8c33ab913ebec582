-- The 16 shard tables. A message lives in messages_NN where NN = CRC32(id) % 16
-- (see pipeline_common::message::shard_of). Times are UTC. written_at is set by the server when
-- the writer inserts the row; a redelivered message keeps its first written_at.
CREATE TABLE IF NOT EXISTS messages_00 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_01 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_02 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_03 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_04 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_05 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_06 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_07 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_08 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_09 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_10 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_11 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_12 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_13 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_14 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS messages_15 (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sender     VARCHAR(64)  NOT NULL,
    recipient  VARCHAR(64)  NOT NULL,
    body       MEDIUMTEXT   NOT NULL,
    sent_at    DATETIME(6)  NOT NULL,
    written_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
