// ECharts, tree-shaken: only the charts and components the portal draws are bundled.
import { use } from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';
import { GaugeChart, PieChart } from 'echarts/charts';
import { TooltipComponent, LegendComponent } from 'echarts/components';

use([CanvasRenderer, GaugeChart, PieChart, TooltipComponent, LegendComponent]);

export { default as VChart } from 'vue-echarts';
