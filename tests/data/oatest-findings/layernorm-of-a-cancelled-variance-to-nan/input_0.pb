
Bin2J€C