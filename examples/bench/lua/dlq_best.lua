-- The best dead-letter script a client can send: per batch, the stale entries (XPENDING IDLE),
-- their bodies in one XRANGE over the batch's ID range, one XADD each to the DLQ with the
-- module's reclaim-* fields, and one XACK of the batch. Returns how many it moved.
local key, dlq = KEYS[1], KEYS[2]
local group, min_idle, count, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local p = redis.call('XPENDING', key, group, 'IDLE', min_idle, '-', '+', count)
if #p == 0 then return 0 end
local bodies = {}
for _, e in ipairs(redis.call('XRANGE', key, p[1][1], p[#p][1])) do bodies[e[1]] = e[2] end
local acked = {}
for _, e in ipairs(p) do
  local id, fields = e[1], bodies[e[1]]
  if fields then
    local args = {dlq, '*'}
    for _, f in ipairs(fields) do args[#args + 1] = f end
    local meta = {'reclaim-stream', key, 'reclaim-group', group, 'reclaim-id', id,
      'reclaim-consumer', e[2], 'reclaim-deliveries', tostring(e[4]),
      'reclaim-reason', 'max-deliveries', 'reclaim-moved-ms', now}
    for _, m in ipairs(meta) do args[#args + 1] = m end
    redis.call('XADD', unpack(args))
  end
  acked[#acked + 1] = id
end
redis.call('XACK', key, group, unpack(acked))
return #acked
