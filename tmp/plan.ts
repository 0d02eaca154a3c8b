import { DatabaseSync } from 'node:sqlite';
const db = new DatabaseSync(':memory:');
db.exec(`create table sr (id integer primary key, send_id text not null, address text not null, status text not null, retry_at bigint check (retry_at is null or status = 'Deferred'), deferred_at bigint, unique(send_id,address));
create index sr_page on sr (send_id); create index sr_retry on sr (send_id, retry_at) where retry_at is not null;`);
db.exec(`alter table sr add column x bigint check (x is null or status = 'Deferred')`);
for (const q of [`select id from sr where send_id='s1' and retry_at is not null and retry_at <= 1200 order by retry_at, id limit 500`, `select min(retry_at) from sr where send_id='s1' and retry_at is not null`, `select count(*) from sr where retry_at is not null`])
  console.log(q, db.prepare('explain query plan ' + q).all().map((r) => r.detail));
