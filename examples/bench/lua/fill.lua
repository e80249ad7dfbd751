local n = tonumber(ARGV[1])
local base = tonumber(ARGV[2])
for i = 1, n do
  redis.call('XADD', KEYS[1], '*', 'n', base + i, 'body', ARGV[3])
end
return n
