local first, n, per = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for s = first, first + n - 1 do
  local k = 'pol:' .. s
  for i = 1, per do redis.call('XADD', k, '*', 'n', i, 'body', ARGV[4]) end
  redis.call('XGROUP', 'CREATE', k, 'g', '0')
  redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', per, 'STREAMS', k, '>')
end
return n
