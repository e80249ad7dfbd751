local key, dlq = KEYS[1], KEYS[2]
local group, consumer = ARGV[1], ARGV[2]
local r = redis.call('XAUTOCLAIM', key, group, consumer, ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local moved = 0
for _, e in ipairs(r[2]) do
  local id = e[1]
  local p = redis.call('XPENDING', key, group, id, id, 1)
  local args = {dlq, '*'}
  for _, f in ipairs(e[2]) do args[#args + 1] = f end
  args[#args + 1] = 'reclaim-stream'
  args[#args + 1] = key
  args[#args + 1] = 'reclaim-group'
  args[#args + 1] = group
  args[#args + 1] = 'reclaim-id'
  args[#args + 1] = id
  args[#args + 1] = 'reclaim-consumer'
  args[#args + 1] = consumer
  args[#args + 1] = 'reclaim-deliveries'
  args[#args + 1] = tostring(p[1][4])
  redis.call('XADD', unpack(args))
  redis.call('XACK', key, group, id)
  moved = moved + 1
end
return {r[1], moved}
